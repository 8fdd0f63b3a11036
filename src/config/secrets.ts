import { readFileSync } from 'node:fs';
import { envName } from './options.js';

/**
 * The secrets a process was given, to keep them out of everything it prints (`cli/main.ts` redacts
 * every line, and the last-resort error print, with these): the API key from either environment
 * variable, `--api-key` or the file `--api-key-file` (or its variable) names, and the hash salt.
 * Read from the raw arguments and environment, so it holds even when the config fails to parse.
 */
export function secretsGiven(args: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const found = [env.QUERY_API_KEY, env[envName('api-key')], env[envName('hash-salt')]];
  const keyFiles = [env[envName('api-key-file')]];
  args.forEach((arg, i) => {
    for (const flag of ['--api-key', '--api-key-file', '--hash-salt']) {
      const value = arg === flag ? args[i + 1] : arg.startsWith(`${flag}=`) ? arg.slice(flag.length + 1) : undefined;
      if (value === undefined) continue;
      if (flag === '--api-key-file') keyFiles.push(value);
      else found.push(value);
    }
  });
  for (const file of keyFiles) {
    if (file === undefined || file === '') continue;
    try {
      found.push(readFileSync(file, 'utf8').trim());
    } catch {
      // Unreadable: the config says so, and nothing from it can be printed.
    }
  }
  return found.filter((k): k is string => k !== undefined && k !== '');
}
