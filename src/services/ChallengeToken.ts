/** Turnstile's own limit on a challenge token; anything longer is not a token and is not worth a network call. */
export const MAX_TOKEN_LENGTH = 2048
