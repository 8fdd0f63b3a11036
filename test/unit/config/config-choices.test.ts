import { describe, expect, it } from 'vitest';
import { DEFAULT_TRACES, OPTIONS, resolveSyncConfig } from '../../../src/config/index.js';
import { ConfigError } from '../../../src/core/errors.js';
import { envName } from '../../../src/config/options.js';

/**
 * A choice is parsed by its kind from the option table (config/reader.ts): a value outside its
 * choices is refused naming where it came from and what was expected, and nothing given takes the
 * option's default, held once in options.ts.
 */

const ENV = { QUERY_API_BASE_URL: 'https://query.example.com', QUERY_API_KEY: 'k' };

function refused(env: NodeJS.ProcessEnv): string {
  try {
    resolveSyncConfig({}, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('choices come from the option table', () => {
  it('every choice sync takes refuses a value outside its choices, naming the variable, the choices and the value', () => {
    const choices = OPTIONS.filter((o) => o.kind === 'choice' && o.commands.includes('sync') && o.name !== 'log-level');
    expect(choices.map((o) => o.name).sort()).toEqual([
      'aggregates-interval',
      'bq-upsert',
      'deletions',
      'destination',
      'log-format',
      'reconcile',
      'schema-contract',
      'traces',
    ]);
    for (const option of choices) {
      // The BigQuery layout is read only for a BigQuery destination.
      const bigquery =
        option.name === 'bq-upsert'
          ? { [envName('destination')]: 'bigquery', [envName('bq-project')]: 'p', [envName('bq-dataset')]: 'd' }
          : {};
      const message = refused({ ...ENV, ...bigquery, [envName(option.name)]: 'bogus' });
      expect(message, option.name).toMatch(new RegExp(`^${envName(option.name)}: expected .+, got "bogus"$`));
      for (const choice of option.choices ?? []) expect(message, option.name).toContain(choice);
    }
  });

  it('keeps the messages that explain a choice', () => {
    expect(refused({ ...ENV, [envName('traces')]: 'some' })).toBe(
      `${envName('traces')}: expected all, traced (events whose tool_calls, error_spans or model show a trace) or none, got "some"`,
    );
    expect(refused({ ...ENV, [envName('reconcile')]: 'on' })).toBe(
      `${envName('reconcile')}: expected off, check (report differences, exit 5) or repair (re-read them), got "on"`,
    );
    expect(refused({ ...ENV, [envName('deletions')]: 'erase' })).toBe(
      `${envName('deletions')}: expected mark (set _deleted_at), delete (remove the rows) or keep (leave them, said once per window), got "erase"`,
    );
    expect(refused({ ...ENV, [envName('destination')]: 'pg' })).toBe(
      `${envName('destination')}: expected duckdb or bigquery, got "pg"`,
    );
  });

  it('nothing given takes each default from the table; a valid choice is taken as given', () => {
    const config = resolveSyncConfig({}, ENV);
    expect(config.traces).toBe(DEFAULT_TRACES);
    expect(config.reconcile).toBe('repair');
    expect(config.schemaContract).toBe('evolve');
    expect(config.destination).toBe('duckdb');
    expect(config.aggregatesInterval).toBe('day');
    expect(config.bigquery).toBeUndefined();
    const chosen = resolveSyncConfig(
      {},
      {
        ...ENV,
        [envName('traces')]: 'traced',
        [envName('reconcile')]: 'off',
        [envName('aggregates-interval')]: 'hour',
      },
    );
    expect([chosen.traces, chosen.reconcile, chosen.aggregatesInterval]).toEqual(['traced', 'off', 'hour']);
  });
});
