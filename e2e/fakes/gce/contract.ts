// The query parameters of each Compute Engine method the emulator serves, as
// the pinned discovery document (discovery.json) declares them; contract.test.ts
// checks this table against the document. A parameter the method does not
// declare is refused as Google's front end refuses one it cannot bind; one it
// declares that the emulator does not act on is refused too, with a message
// saying so, rather than quietly ignored.
import type { Reply } from '../kit/http.js';
import { googleError } from './errors.js';

/** What the emulator does with a declared parameter. */
type Handling = 'honoured' | 'not emulated';

/** Parameters every method takes (the document's top-level `parameters`); none changes an answer here. */
export const STANDARD_PARAMETERS = ['$.xgafv', 'access_token', 'alt', 'callback', 'fields', 'key', 'oauth_token', 'prettyPrint', 'quotaUser', 'uploadType', 'upload_protocol', 'userIp'] as const;

export const METHOD_QUERY_PARAMETERS = {
  'compute.instances.insert': { requestId: 'honoured', sourceInstanceTemplate: 'not emulated', sourceMachineImage: 'not emulated' },
  'compute.instances.list': { filter: 'honoured', maxResults: 'honoured', pageToken: 'honoured', orderBy: 'not emulated' },
  'compute.instances.aggregatedList': { filter: 'honoured', maxResults: 'honoured', pageToken: 'honoured', orderBy: 'not emulated', includeAllScopes: 'not emulated', serviceProjectNumber: 'not emulated' },
  'compute.instances.get': {},
  'compute.instances.delete': { requestId: 'honoured', noGracefulShutdown: 'not emulated' },
  'compute.instances.getGuestAttributes': { queryPath: 'honoured', variableKey: 'not emulated' },
  'compute.zoneOperations.get': {},
  'compute.zoneOperations.wait': {},
} satisfies Record<string, Record<string, Handling>>;

export type MethodId = keyof typeof METHOD_QUERY_PARAMETERS;

const STANDARD = new Set<string>(STANDARD_PARAMETERS);

/** The refusal of the first query parameter `method` cannot take, or undefined. */
export function refuseQuery(method: MethodId, query: URLSearchParams): Reply | undefined {
  const declared: Record<string, Handling> = METHOD_QUERY_PARAMETERS[method];
  for (const name of new Set(query.keys())) {
    if (STANDARD.has(name)) continue;
    const handling = declared[name];
    if (handling === 'honoured') continue;
    if (handling === 'not emulated') return googleError(400, 'invalid', `The emulator does not implement the ${name} parameter of ${method}.`);
    // The wording of Google's front end for a query parameter that is no field of the request message.
    const message = `Invalid JSON payload received. Unknown name "${name}": Cannot bind query parameter. Field '${name}' could not be found in request message.`;
    return googleError(400, 'invalid', message, { details: [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ description: message }] }] });
  }
  return undefined;
}
