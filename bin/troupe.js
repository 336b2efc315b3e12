#!/usr/bin/env node
// The `troupe` command. Node >= 22.18 runs the TypeScript sources directly (type stripping).
import { runCli } from '../src/cli/main.ts';

process.exitCode = await runCli(
  process.argv.slice(2),
  process.env,
  (text) => process.stdout.write(text),
  (text) => process.stderr.write(text),
);
