#!/usr/bin/env node
// Entry point of the leasehold CLI (installed as leasehold and kubectl-leasehold).
import { main } from '../cli/main.js';

const code = await main(process.argv.slice(2));
// Exit once stdout has taken everything: keep-alive API connections and stdin
// would otherwise keep the process up after the command is done.
process.stdout.write('', () => process.exit(code));
