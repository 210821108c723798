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

async function call(method, path, signal, payload, headers) {
  const init = {
    method,
    signal,
    headers: { Accept: 'application/json', ...headers },
    cache: 'no-store',
  };
  if (payload !== undefined) {
    init.body = JSON.stringify(payload);
    init.headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(prefix + path, init);
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

/**
 * postJSON POSTs body as JSON to path with the extra headers, and returns
 * the decoded answer or throws an APIError.
 */
export const postJSON = (path, body, headers, signal) => call('POST', path, signal, body, headers);

/**
 * me says who is signed in: the answer of GET /me ({login, csrf_token}),
 * {signedIn: false} when nobody is (401), or null when the platform has
 * no sign-in at all (404).
 */
export async function me(signal) {
  try {
    return { signedIn: true, ...(await get('/me', signal)) };
  } catch (e) {
    if (e.status === 401) return { signedIn: false };
    if (e.status === 404) return null;
    throw e;
  }
}

const enc = encodeURIComponent;

/** runPath is the API path of a run. */
export const runPath = (run) => `/runs/${enc(run)}`;

/** jobPath is the API path of a job of a run. */
export const jobPath = (run, job) => `/runs/${enc(run)}/jobs/${enc(job)}`;

/** url is the absolute URL of an API path. */
export const url = (path) => prefix + path;
