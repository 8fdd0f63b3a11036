import { mkdirSync, readlinkSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { LeaseOwner } from '../../src/state/leases/lease.js';

/**
 * Leave a lease folder and owner record at `path` as another run would have: by default held by
 * this host and pid namespace; `renewedMsAgo` backdates its heartbeat.
 */
export function leaveLease(path: string, owner: Partial<LeaseOwner> & { readonly renewedMsAgo?: number } = {}): void {
  mkdirSync(path);
  const { renewedMsAgo, ...fields } = owner;
  const record: LeaseOwner = {
    id: 'left-behind',
    purpose: 'sync',
    host: hostname(),
    pidNamespace: ownPidNamespace(),
    pid: 999_999,
    since: '2026-11-23T00:00:00.000Z',
    leaseMs: 30_000,
    inode: statSync(path).ino,
    ...fields,
  };
  writeFileSync(`${path}.owner.json`, JSON.stringify(record));
  if (renewedMsAgo !== undefined) {
    const at = new Date(Date.now() - renewedMsAgo);
    utimesSync(path, at, at);
  }
}

function ownPidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}
