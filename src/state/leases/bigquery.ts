import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { TableField } from '@google-cloud/bigquery';
import { StateError } from '../../core/errors.js';
import { HEARTBEAT_MS, LEASE_MS, type LeaseProvider, type Lock, type LockOptions } from './lease.js';

/**
 * The run lease in BigQuery, for runs that share no file (pods, CI runners): one row per purpose
 * (`sync`, `backfill`) of `_query_sync_lease`, taken with a conditional MERGE (inserted when absent,
 * replaced when expired, untouched while another owner's lease lives), renewed by a heartbeat
 * (`UPDATE … WHERE owner = me`; no row updated: the lease was lost), and deleted at the end.
 * Expiry is judged by BigQuery's clock (`CURRENT_TIMESTAMP()`), the one clock every runner shares.
 * Two runs racing for it: BigQuery serializes DML on one table, so one MERGE changes the row and
 * the other finds it live.
 */

export const LEASE_TABLE = '_query_sync_lease';

export const LEASE_FIELDS: TableField[] = [
  { name: 'name', type: 'STRING', mode: 'REQUIRED' },
  { name: 'owner', type: 'STRING', mode: 'REQUIRED' },
  { name: 'host', type: 'STRING', mode: 'NULLABLE' },
  { name: 'pid', type: 'INT64', mode: 'NULLABLE' },
  { name: 'acquired', type: 'TIMESTAMP', mode: 'NULLABLE' },
  { name: 'expires', type: 'TIMESTAMP', mode: 'REQUIRED' },
];

/** What the lease needs of the destination: its table, DML with the rows it changed, a SELECT. */
export interface LeaseSql {
  /** The lease table's path as SQL names it (`` `project`.`dataset`.`_query_sync_lease` ``). */
  readonly table: string;
  /** `project.dataset`, for messages. */
  readonly dataset: string;
  ensureLeaseTable(): Promise<void>;
  /** Run one DML statement with named parameters; the rows it changed. */
  dml(operation: string, sql: string, params: Record<string, string | number>): Promise<number>;
  select(operation: string, sql: string, params: Record<string, string | number>): Promise<Record<string, unknown>[]>;
}

interface Holder {
  readonly owner: string;
  readonly host: string;
  readonly pid: number;
  readonly heldSeconds: number;
  readonly expiresInMs: number;
}

/** The lease's statements on `table`, the lease table's path as SQL names it. */
export function leaseSql(table: string): { take: string; renew: string; release: string; look: string } {
  const expires = `TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL @lease_ms MILLISECOND)`;
  return {
    take: [
      `MERGE ${table} AS T`,
      'USING (SELECT @name AS name) AS S',
      'ON T.`name` = S.`name`',
      'WHEN MATCHED AND T.`expires` < CURRENT_TIMESTAMP() THEN',
      `  UPDATE SET \`owner\` = @owner, \`host\` = @host, \`pid\` = @pid, \`acquired\` = CURRENT_TIMESTAMP(), \`expires\` = ${expires}`,
      'WHEN NOT MATCHED THEN',
      `  INSERT (\`name\`, \`owner\`, \`host\`, \`pid\`, \`acquired\`, \`expires\`) VALUES (@name, @owner, @host, @pid, CURRENT_TIMESTAMP(), ${expires})`,
    ].join('\n'),
    renew: `UPDATE ${table} SET \`expires\` = ${expires} WHERE \`name\` = @name AND \`owner\` = @owner`,
    release: `DELETE FROM ${table} WHERE \`name\` = @name AND \`owner\` = @owner`,
    look:
      'SELECT `owner` AS owner, `host` AS host, `pid` AS pid, TIMESTAMP_DIFF(CURRENT_TIMESTAMP(), `acquired`, SECOND) AS held_s, ' +
      `TIMESTAMP_DIFF(\`expires\`, CURRENT_TIMESTAMP(), MILLISECOND) AS expires_in_ms FROM ${table} WHERE \`name\` = @name`,
  };
}

export class BigQueryLeases implements LeaseProvider {
  constructor(private readonly sql: LeaseSql) {}

  async acquire(_name: string, options: LockOptions): Promise<Lock> {
    const name = options.purpose;
    const leaseMs = options.leaseMs ?? LEASE_MS;
    const owner = randomUUID();
    const where = `the ${name} lease in table ${LEASE_TABLE} of BigQuery dataset ${this.sql.dataset}`;
    const statements = leaseSql(this.sql.table);
    const params = { name, owner, host: hostname(), pid: process.pid, lease_ms: leaseMs };
    await this.sql.ensureLeaseTable();
    const deadline = options.clock.now() + (options.waitMs ?? 0);
    for (;;) {
      const before = await this.look(name, statements.look);
      if (before === undefined || before.expiresInMs < 0) {
        const taken = await this.sql.dml(`taking ${where}`, statements.take, params);
        if (taken === 1) {
          if (before !== undefined) {
            options.onTakeOver?.(
              `took over ${where} from run ${before.owner} (pid ${before.pid} on ${before.host}): its lease expired ${Math.round(-before.expiresInMs / 1000)} s ago ` +
                `(not renewed for ${Math.round((leaseMs - before.expiresInMs) / 1000)} s, lease ${leaseMs / 1000} s)`,
              undefined,
            );
          }
          return this.held(name, owner, where, statements, leaseMs, options);
        }
        continue; // another run took it between our look and our MERGE: look again
      }
      if (options.clock.now() >= deadline) {
        throw new StateError(
          `${where} is held by run ${before.owner} (pid ${before.pid} on ${before.host}, for ${before.heldSeconds} s); it expires in ` +
            `${Math.max(0, Math.ceil(before.expiresInMs / 1000))} s unless renewed. Another run uses this dataset's state: wait for it to finish ` +
            `(or pass --lock-wait, e.g. --lock-wait 10m). A run that was killed leaves a lease that is taken over ${leaseMs / 1000} s after its last renewal.`,
        );
      }
      await options.clock.sleep(
        Math.min(Math.max(options.pollMs ?? 1_000, 1), Math.max(1, deadline - options.clock.now())),
      );
    }
  }

  private async look(name: string, sql: string): Promise<Holder | undefined> {
    const [row] = await this.sql.select(`reading the ${name} lease`, sql, { name });
    if (row === undefined) return undefined;
    return {
      owner: String(row['owner']),
      host: String(row['host'] ?? '?'),
      pid: Number(row['pid'] ?? 0),
      heldSeconds: Number(row['held_s'] ?? 0),
      expiresInMs: Number(row['expires_in_ms'] ?? 0),
    };
  }

  private held(
    name: string,
    owner: string,
    where: string,
    statements: ReturnType<typeof leaseSql>,
    leaseMs: number,
    options: LockOptions,
  ): Lock {
    let renewedAt = options.clock.now();
    let released = false;
    let lost = false;
    const lose = (why: string): void => {
      if (lost || released) return;
      lost = true;
      clearInterval(timer);
      options.onLost?.(new StateError(`lost ${where}: ${why}; another run may be writing now, so this one stops`));
    };
    const renew = async (): Promise<void> => {
      try {
        const renewed = await this.sql.dml(`renewing ${where}`, statements.renew, { name, owner, lease_ms: leaseMs });
        if (renewed === 1) renewedAt = options.clock.now();
        else lose('it was taken over by another run (our heartbeat found no row of ours)');
      } catch (error) {
        if (options.clock.now() - renewedAt >= leaseMs)
          lose(`it could not be renewed for ${Math.round(leaseMs / 1000)} s (${(error as Error).message})`);
      }
    };
    const timer = setInterval(() => void renew(), Math.min(HEARTBEAT_MS, leaseMs / 3));
    timer.unref();
    return {
      release: async () => {
        if (released) return;
        released = true;
        clearInterval(timer);
        if (lost) return;
        await this.sql.dml(`releasing ${where}`, statements.release, { name, owner }).catch(() => undefined);
      },
    };
  }
}
