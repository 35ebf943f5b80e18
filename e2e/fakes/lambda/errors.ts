// Lambda's error shape: {"error": {code, message, suggestion?}}, with the
// codes of its OpenAPI spec.
import type { ErrorStyle } from '../kit/api.js';

/** The code the emulator puts in a 429's body. Lambda documents the 429 but not its body: key on the status. */
export const RATE_LIMIT_CODE = 'global/rate-limited';

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
    case 429:
      return RATE_LIMIT_CODE;
    default:
      return 'global/unknown';
  }
}

export function errorBody(code: string, message: string, suggestion?: string) {
  return { error: suggestion === undefined ? { code, message } : { code, message, suggestion } };
}

export const LAMBDA_ERRORS: ErrorStyle = {
  body: errorBody,
  code: codeFor,
  unauthorized: { message: 'API key was invalid, expired, or deleted.', suggestion: 'Check your API key or create a new one, then try again.' },
};
