// The CLI's exit codes. `leasehold run` exits with the remote command's code
// when the command ran; the codes below are the CLI's own, at the top of the
// range as ssh's 255 is, so a script can tell "never ran" from most remote
// failures. docs/cli.md lists them.

export const EXIT = {
  ok: 0,
  /** A command other than run failed (API error, not found). */
  error: 1,
  /** Bad flags or arguments. */
  usage: 2,
  /** Ctrl-C before the remote command started. */
  interrupted: 130,
  /** No Offer matches spec.where (or the named Offer does not). */
  noOfferMatches: 250,
  /** Every matching candidate is above its Offer's price cap. */
  priceCap: 251,
  /** The controller's maxLeases (or a per-namespace limit) is reached. */
  maxLeases: 252,
  /** The Lease cannot be used: its release was recorded, it failed, or it has no room for this device's key. */
  leaseUnusable: 253,
  /** run: anything else before the command ran (API, SSH, device key). */
  runFailed: 255,
} as const;

/** Raised for an outcome with its own exit code; the message is shown as is. */
export class ExitError extends Error {
  override readonly name = 'ExitError';
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

/** The exit code for a Pending Lease's reason the run cannot wait out, or undefined when it waits. */
export function pendingExitCode(reason: string | undefined): number | undefined {
  switch (reason) {
    case 'NoMatchingOffer':
    case 'NamespaceNotAllowed':
      return EXIT.noOfferMatches;
    case 'OverPriceCap':
    case 'NamespacePriceCap':
      return EXIT.priceCap;
    case 'MaxLeases':
    case 'MaxLeasesPerNamespace':
      return EXIT.maxLeases;
    case 'InvalidSpec':
      return EXIT.usage;
    default:
      return undefined;
  }
}
