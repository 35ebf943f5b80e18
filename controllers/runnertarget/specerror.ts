/** A problem the user fixes in the RunnerTarget's spec or a Secret it names; `reason` becomes the Ready condition's. */
export class TargetSpecError extends Error {
  override readonly name: string = 'TargetSpecError';

  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}
