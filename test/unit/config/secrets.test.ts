import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { secretsGiven } from '../../../src/config/secrets.js';
import { redact } from '../../../src/core/log.js';
import { dir } from '../../fakes/lifecycle.js';

describe('the secrets a process was given, for the one redaction of everything it prints', () => {
  it('finds the key in either variable, the flag (both forms), the file a flag or variable names, and the hash salt', () => {
    const d = dir();
    const fromFlag = join(d, 'key-a');
    const fromEnv = join(d, 'key-b');
    writeFileSync(fromFlag, 'qs_org_from_flag_file\n');
    writeFileSync(fromEnv, 'qs_org_from_env_file');
    const found = secretsGiven(
      ['sync', '--api-key', 'qs_org_flag', '--api-key-file', fromFlag, '--hash-salt=pepper-1234'],
      {
        QUERY_API_KEY: 'qs_org_env',
        QUERY_SYNC_API_KEY: 'qs_org_env2',
        QUERY_SYNC_API_KEY_FILE: fromEnv,
        QUERY_SYNC_HASH_SALT: 'salt-from-env',
      },
    );
    expect(new Set(found)).toEqual(
      new Set([
        'qs_org_env',
        'qs_org_env2',
        'salt-from-env',
        'qs_org_flag',
        'pepper-1234',
        'qs_org_from_flag_file',
        'qs_org_from_env_file',
      ]),
    );
    // What a last-resort error print would show.
    const message = 'Error: GET /v1/events failed: server said "qs_org_from_flag_file is not allowed"';
    expect(redact(message, found)).toBe('Error: GET /v1/events failed: server said "[redacted] is not allowed"');
  });

  it('an unreadable key file and empty values give nothing (the config reports the file)', () => {
    expect(secretsGiven(['sync', '--api-key-file', join(dir(), 'missing')], { QUERY_API_KEY: '' })).toEqual([]);
  });
});
