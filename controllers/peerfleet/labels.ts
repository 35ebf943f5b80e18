// The labels and annotations PeerFleet writes on our objects (mirror Jobs
// and their pods) and reads from them (nodes, our own pods). The protocol's
// keys on the peer's Jobs are in src/providers/peerqueue/types.ts.

/** On a mirror Job and its pods: the PeerFleet that runs it. Pods carrying it are lent work, not ours. */
export const PEERFLEET_LABEL = 'leasehold.dev/peerfleet';
/** On a mirror Job and its pods: the node it is pinned to. */
export const NODE_LABEL = 'leasehold.dev/node';
/** On a mirror Job and its pods: the uid of the peer Job it mirrors; the mirror's name comes from it too. */
export const PEER_JOB_UID_LABEL = 'leasehold.dev/peer-job-uid';
/** On a mirror Job: namespace/name of the peer Job, for people reading it. */
export const PEER_JOB_ANNOTATION = 'leasehold.dev/peer-job';

/** On our pods: what the work is worth, in US dollars per GPU-hour. */
export const VALUE_ANNOTATION = 'leasehold.dev/value-per-gpu-hour';
/** On a node: "off" takes it out of lending. */
export const LENDING_ANNOTATION = 'leasehold.dev/lending';
/** On a node: how many of its GPUs are never lent. */
export const RESERVED_GPUS_ANNOTATION = 'leasehold.dev/reserved-gpus';
