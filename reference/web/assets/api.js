// The JSON API the UI reads, under the prefix the index page names.

/** The API's path prefix, such as "/api/v1". */
export const prefix = document.querySelector('meta[name="cikit-api"]').content;

/** An APIError is an answer that was not a success; its message is the API's "error". */
export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(method, path, signal) {
  const res = await fetch(prefix + path, {
    method,
    signal,
    headers: { Accept: 'application/json' },
    cache: 'no-store',
  });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: a proxy's error page; the status says enough.
  }
  if (!res.ok) {
    const msg = body && typeof body.error === 'string' ? body.error : `${res.status} ${res.statusText}`.trim();
    throw new APIError(res.status, msg);
  }
  return body;
}

/** get returns the decoded answer to GET path, or throws an APIError. */
export const get = (path, signal) => call('GET', path, signal);

/** post returns the decoded answer to POST path, or throws an APIError. */
export const post = (path, signal) => call('POST', path, signal);

const enc = encodeURIComponent;

/** runPath is the API path of a run. */
export const runPath = (run) => `/runs/${enc(run)}`;

/** jobPath is the API path of a job of a run. */
export const jobPath = (run, job) => `/runs/${enc(run)}/jobs/${enc(job)}`;

/** url is the absolute URL of an API path. */
export const url = (path) => prefix + path;
