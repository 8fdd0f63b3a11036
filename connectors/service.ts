/**
 * Facts about the service as a whole (not one resource).
 *
 * The project header: the spec names `X-Service-Project-Id`, the vendor's SDK (the real service)
 * `X-Raindrop-Project-Id`. Both are sent on every request, so either server reads the scope with no
 * setting; `--project-header` still overrides the list.
 */
export const PROJECT_HEADERS: readonly string[] = ['X-Raindrop-Project-Id', 'X-Service-Project-Id'];
