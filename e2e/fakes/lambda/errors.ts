// Lambda's error shape: {"error": {code, message, suggestion?}}, with the
// codes of its API description (spec/).
import type { ErrorStyle } from '../kit/api.js';
import { TextBody } from '../kit/http.js';

/**
 * The body of a 429. The API description has no 429 and no code for a rate
 * limit; Lambda's docs ("Are API requests rate-limited?") say a limited
 * request gets HTTP 429 with Cloudflare's "error code: 1015", which Cloudflare
 * sends as plain text, not in Lambda's JSON shape. The docs win here (see
 * DESIGN.md, Contracts), so clients must act on the status.
 */
export const RATE_LIMIT_BODY = 'error code: 1015';

export function codeFor(status: number): string {
  switch (status) {
    case 400:
      return 'global/invalid-parameters';
    case 401:
      return 'global/invalid-api-key';
    case 403:
      return 'global/account-inactive';
    case 404:
      return 'global/object-does-not-exist';
    case 409:
      return 'global/conflict';
    default:
      // ApiErrorInternal: the description's one code for a failure on Lambda's side.
      return status >= 500 ? 'global/internal-error' : 'global/invalid-parameters';
  }
}

export function errorBody(code: string, message: string, suggestion?: string) {
  return { error: suggestion === undefined ? { code, message } : { code, message, suggestion } };
}

export const LAMBDA_ERRORS: ErrorStyle = {
  body: (code, message, suggestion, status) => (status === 429 ? new TextBody(RATE_LIMIT_BODY) : errorBody(code, message, suggestion)),
  code: codeFor,
  unauthorized: { message: 'API key was invalid, expired, or deleted.', suggestion: 'Check your API key or create a new one, then try again.' },
};
