/**
 * A page's markdown (an mdast tree) as Preact elements, node by node: text is always text, raw
 * HTML is shown as its text, images as their description, and a link goes where its address says
 * (`page:` and `table:` inside the console, http(s) and mailto as ordinary links, anything else
 * not at all).
 */
import type { ComponentChildren } from "preact"
import type { Nodes, RootContent } from "mdast"
import { Link } from "../router.tsx"

/** Where a link of a page goes: a screen of the console, another site, or nowhere (an address not allowed). */
export type LinkTarget = { readonly kind: "console"; readonly to: string } | { readonly kind: "external"; readonly href: string } | { readonly kind: "none" }

export interface MarkdownContext {
  readonly linkTarget: (url: string) => LinkTarget
  /** The page's link reference definitions (`[x]: url`), for `[text][x]`. */
  readonly definitions: Readonly<Record<string, { readonly url: string }>>
  /** Added to a heading's depth (the screen's title is the h1). */
  readonly headingShift: number
}

const children = (nodes: ReadonlyArray<RootContent>, context: MarkdownContext): ComponentChildren =>
  nodes.map((node, index) => <MarkdownNode key={index} node={node} context={context} />)

export const MarkdownNode = (props: { readonly node: Nodes; readonly context: MarkdownContext }): ComponentChildren => {
  const { node, context } = props
  switch (node.type) {
    case "root":
      return <>{children(node.children, context)}</>
    case "paragraph":
      return <p>{children(node.children, context)}</p>
    case "heading": {
      const depth = Math.min(6, node.depth + context.headingShift)
      const inner = children(node.children, context)
      return depth === 1 ? <h1>{inner}</h1> : depth === 2 ? <h2>{inner}</h2> : depth === 3 ? <h3 class="page-h3">{inner}</h3> : depth === 4 ? <h4>{inner}</h4> : depth === 5 ? <h5>{inner}</h5> : <h6>{inner}</h6>
    }
    case "text":
      return <>{node.value}</>
    case "emphasis":
      return <em>{children(node.children, context)}</em>
    case "strong":
      return <strong>{children(node.children, context)}</strong>
    case "inlineCode":
      return <code>{node.value}</code>
    case "break":
      return <br />
    case "thematicBreak":
      return <hr />
    case "blockquote":
      return <blockquote>{children(node.children, context)}</blockquote>
    case "list": {
      const items = children(node.children, context)
      return node.ordered === true ? <ol start={node.start ?? undefined}>{items}</ol> : <ul>{items}</ul>
    }
    case "listItem":
      // A tight list's paragraphs are its items' text, not paragraphs of their own.
      return <li>{node.spread === true ? children(node.children, context) : node.children.map((child, index) =>
        child.type === "paragraph" ? <span key={index}>{children(child.children, context)}</span> : <MarkdownNode key={index} node={child} context={context} />
      )}</li>
    case "code":
      return <pre class="code"><code>{node.value}</code></pre>
    case "html":
      return node.value.includes("\n") ? <pre class="code">{node.value}</pre> : <>{node.value}</>
    case "link":
    case "linkReference": {
      const url = node.type === "link" ? node.url : context.definitions[node.identifier]?.url
      const inner = children(node.children, context)
      if (url === undefined) return <>{inner}</>
      const target = context.linkTarget(url)
      if (target.kind === "console") return <Link to={target.to}>{inner}</Link>
      if (target.kind === "external") return <a href={target.href} rel="noopener noreferrer">{inner}</a>
      return <>{inner}</>
    }
    case "image":
      // Images are not loaded from a page (no address leaves the console); their description stays.
      return <>{node.alt ?? ""}</>
    case "imageReference":
      return <>{node.alt ?? ""}</>
    default:
      return null
  }
}
