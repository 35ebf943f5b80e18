// What every kind's controllers/<kind>/register.ts takes: the installation,
// the controller's own namespace and its reconcile workers, in one shape, so
// cmd/controller.ts wires each kind the same way. A kind adds its own options
// by extending this; each exports register<Kind>Controller(mgr, options),
// which makes its informers, metrics and reconciler, adds its work queue to
// the manager and returns the reconciler.
export interface ControllerOptions {
  /** This installation's ID (the installation ID Secret): every machine name and every object it takes on carries it. */
  installationID: string;
  /** The controller's own namespace, where its Secrets, records and coordination Leases live. */
  controllerNamespace: string;
  /** Reconcile workers of the kind's work queue. */
  concurrency: number;
}
