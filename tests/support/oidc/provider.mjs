// A real OpenID provider for ARVIS's identity tests: `oidc-provider` on 127.0.0.1.
//
//   node provider.mjs [--port N] [--config FILE] [--exit-with-stdin]
//
// Port 0 (the default) picks a free one. When the provider answers, one JSON line goes
// to stdout: {"ready": true, "issuer": ..., "port": ..., "admin_token": ..., "clients":
// ..., "users": ..., "resources": ..., "signing_kids": ...}. Logs go to stderr. The
// process ends on SIGTERM/SIGINT, and with --exit-with-stdin when its stdin closes (so a
// test runner that dies takes it along). README.md beside this file describes the configuration.
//
// What the library does not have built in is written here with its own public API:
// the login page (interactionDetails / interactionFinished), the RFC 8693 token-exchange
// grant (registerGrantType, provider.AccessToken, provider.ResourceServer), and key
// rotation (a new Provider over the same storage and cookie keys, swapped in atomically).

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { parseArgs } from 'node:util';

import * as jose from 'jose';
import Provider, { errors } from 'oidc-provider';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TOKEN_TYPE = {
  access_token: 'urn:ietf:params:oauth:token-type:access_token',
  id_token: 'urn:ietf:params:oauth:token-type:id_token',
  jwt: 'urn:ietf:params:oauth:token-type:jwt',
};
// The Ed25519 key signs for both names of its algorithm: "EdDSA" (RFC 8037, what most
// providers emit) and "Ed25519" (RFC 9864's fully specified name).
const SIGNING_ALGS = ['RS256', 'ES256', 'EdDSA', 'Ed25519'];

// Claims a directory entry may not set on a token: the protocol owns them. (`may_act`,
// RFC 8693 §4.4, is the directory's to set: who may act for this person.)
const PROTOCOL_CLAIMS = new Set([
  'iss', 'sub', 'aud', 'exp', 'iat', 'nbf', 'jti', 'client_id', 'scope', 'act',
  'cnf', 'azp', 'auth_time', 'nonce', 'at_hash', 'c_hash', 's_hash', 'sid', 'acr', 'amr',
  'authorization_details',
]);
// Claims released under the `arvis` scope (ID token, userinfo) besides any a user carries.
const ARVIS_CLAIMS = ['tenant', 'arvis_roles', 'groups'];
const STANDARD_CLAIMS = new Set(['name', 'preferred_username', 'email', 'email_verified']);
const ROLES = new Set(['agent', 'approver', 'auditor', 'admin']);

// ---------------------------------------------------------------------------------------
// Defaults: what `node provider.mjs` serves with no configuration. tests/support/oidc.py
// passes overrides in the same shape (lists merged by client_id / sub / identifier).

const DEFAULTS = {
  resources: [
    // ARVIS itself: tokens for it carry aud "arvis". Three indicators, one per signing
    // algorithm, so a test can ask for an RS256, ES256 or EdDSA token for the same audience.
    { identifier: 'urn:arvis', audience: 'arvis', scope: 'arvis:api', alg: 'RS256', ttl: 600 },
    { identifier: 'urn:arvis:es256', audience: 'arvis', scope: 'arvis:api', alg: 'ES256', ttl: 600 },
    { identifier: 'urn:arvis:eddsa', audience: 'arvis', scope: 'arvis:api', alg: 'EdDSA', ttl: 600 },
    { identifier: 'urn:arvis:ed25519', audience: 'arvis', scope: 'arvis:api', alg: 'Ed25519', ttl: 600 },
    // A tool that wants a per-user credential (the target of a token exchange).
    { identifier: 'urn:tool:example', audience: 'urn:tool:example', scope: 'tool:read tool:write', alg: 'RS256', ttl: 300 },
  ],
  clients: [
    {
      client_id: 'arvis-agent',
      client_name: 'ARVIS agent (machine)',
      client_secret: 'arvis-agent-secret',
      grant_types: ['client_credentials', TOKEN_EXCHANGE],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
      default_resource: 'urn:arvis',
      arvis_claims: { tenant: 'acme', arvis_roles: ['agent'], groups: ['agents'] },
      token_exchange_subject_audiences: ['arvis'],
    },
    {
      client_id: 'arvis-console',
      client_name: 'ARVIS console',
      client_secret: 'arvis-console-secret',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1:8000/console/oidc/callback'],
      post_logout_redirect_uris: ['http://127.0.0.1:8000/console/sign-in'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
    {
      client_id: 'arvis-exchange',
      client_name: 'ARVIS token exchange',
      client_secret: 'arvis-exchange-secret',
      grant_types: [TOKEN_EXCHANGE],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
      token_exchange_subject_audiences: ['arvis'],
    },
  ],
  users: [
    user('alice', 'acme', ['approver'], ['ops'], 'Alice Approver'),
    user('bob', 'acme', ['auditor'], ['audit'], 'Bob Auditor'),
    user('carol', 'acme', ['admin'], ['it'], 'Carol Admin'),
    user('dave', 'acme', ['agent'], ['agents'], 'Dave Delegator'),
    user('gina', 'globex', ['approver'], ['ops'], 'Gina Globex'),
  ],
};

function user(sub, tenant, roles, groups, name) {
  return {
    sub,
    password: `${sub}-password`,
    claims: {
      tenant,
      arvis_roles: roles,
      groups,
      name,
      preferred_username: sub,
      email: `${sub}@${tenant}.test`,
      email_verified: true,
    },
  };
}

// ---------------------------------------------------------------------------------------
// Keys

let keyGeneration = 0;

function generateSigningKeys() {
  keyGeneration += 1;
  // The JWK comes out of the key generation itself. Exporting the generated KeyObject
  // (privateKey.export({ format: 'jwk' })) deadlocks Node.js 20 now and then: a garbage
  // collection during the export runs the finished key-generation job's destructor, which
  // waits for the key's mutex the export holds (seen in 1 start of 10 or so, the process
  // stuck for good before its ready line).
  const make = (name, alg, type, options) => {
    const { privateKey } = crypto.generateKeyPairSync(type, {
      ...options,
      publicKeyEncoding: { type: 'spki', format: 'der' },
      privateKeyEncoding: { format: 'jwk' },
    });
    const kid = `${name}-${keyGeneration}-${crypto.randomBytes(4).toString('hex')}`;
    return { ...privateKey, ...(alg ? { alg } : {}), use: 'sig', kid };
  };
  return [
    make('rs256', 'RS256', 'rsa', { modulusLength: 2048 }),
    make('es256', 'ES256', 'ec', { namedCurve: 'P-256' }),
    make('ed25519', undefined, 'ed25519'), // no "alg": it signs EdDSA and Ed25519
  ];
}

function publicJwk(jwk) {
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  return {
    ...key.export({ format: 'jwk' }),
    ...(jwk.alg ? { alg: jwk.alg } : {}),
    use: jwk.use ?? 'sig',
    kid: jwk.kid,
  };
}

function signsWith(jwk, alg) {
  if (jwk.alg) return jwk.alg === alg;
  switch (alg) {
    case 'RS256': return jwk.kty === 'RSA';
    case 'ES256': return jwk.kty === 'EC' && jwk.crv === 'P-256';
    default: return jwk.kty === 'OKP' && jwk.crv === 'Ed25519';
  }
}

function checkPrivateJwks(jwks, where) {
  if (!jwks || !Array.isArray(jwks.keys) || jwks.keys.length === 0) {
    throw new Error(`${where}: a JWKS {"keys": [...]} of private signing keys is required`);
  }
  for (const jwk of jwks.keys) {
    if (!jwk.kid || !jwk.d) {
      throw new Error(`${where}: every key needs a kid and its private part`);
    }
  }
  return jwks.keys.map((jwk) => ({ use: 'sig', ...jwk }));
}

// ---------------------------------------------------------------------------------------
// The directory: everything a test may change while the provider runs.

const state = {
  issuer: undefined,
  adminToken: undefined,
  cookieKeys: [crypto.randomBytes(32).toString('base64url')],
  keys: [], // private JWKs; the first key of an alg signs, the rest stay published
  clients: new Map(),
  users: new Map(),
  resources: new Map(),
};

function mergeBy(defaults, overrides, key) {
  const merged = new Map(defaults.map((item) => [item[key], structuredClone(item)]));
  for (const item of overrides ?? []) {
    if (!item || typeof item[key] !== 'string') {
      throw new Error(`every entry needs a string "${key}"`);
    }
    merged.set(item[key], { ...(merged.get(item[key]) ?? {}), ...structuredClone(item) });
  }
  return merged;
}

function checkUser(entry) {
  if (typeof entry.sub !== 'string' || !entry.sub) throw new Error('a user needs a sub');
  if (typeof entry.password !== 'string' || !entry.password) {
    throw new Error(`user ${entry.sub}: a password is required`);
  }
  const claims = entry.claims ?? {};
  if (typeof claims !== 'object' || Array.isArray(claims)) {
    throw new Error(`user ${entry.sub}: claims must be an object`);
  }
  checkClaims(claims, `user ${entry.sub}`);
  return { sub: entry.sub, password: entry.password, claims };
}

function checkClaims(claims, where) {
  for (const name of Object.keys(claims)) {
    if (PROTOCOL_CLAIMS.has(name)) throw new Error(`${where}: claim ${name} is set by the protocol`);
  }
  if ('arvis_roles' in claims) {
    const roles = claims.arvis_roles;
    if (!Array.isArray(roles)) throw new Error(`${where}: arvis_roles must be an array`);
    // Unknown roles are allowed on purpose: a test may check that ARVIS refuses them.
  }
}

function checkResource(entry) {
  if (typeof entry.identifier !== 'string' || !URL.parse(entry.identifier)) {
    throw new Error('a resource needs an absolute-URI identifier (RFC 8707)');
  }
  const alg = entry.alg ?? 'RS256';
  if (!SIGNING_ALGS.includes(alg)) throw new Error(`resource ${entry.identifier}: alg ${alg} is not one of ${SIGNING_ALGS}`);
  return {
    identifier: entry.identifier,
    audience: entry.audience ?? entry.identifier,
    scope: entry.scope ?? '',
    alg,
    ttl: entry.ttl ?? 600,
  };
}

function resourceServerInfo(resource) {
  return {
    scope: resource.scope,
    audience: resource.audience,
    accessTokenTTL: resource.ttl,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: resource.alg } },
  };
}

function claimNames() {
  const names = new Set(ARVIS_CLAIMS);
  for (const entry of state.users.values()) {
    for (const name of Object.keys(entry.claims)) {
      if (!STANDARD_CLAIMS.has(name)) names.add(name);
    }
  }
  return [...names].sort();
}

function tokenClaims(claims) {
  return Object.fromEntries(Object.entries(claims ?? {}).filter(([name]) => !PROTOCOL_CLAIMS.has(name)));
}

// ---------------------------------------------------------------------------------------
// The provider. It is rebuilt from `state` whenever clients, users' claim names or keys
// change; sessions, grants and interactions live in the library's in-memory adapter, which
// all instances of this process share, and cookies are signed with the same keys.

const exchanged = new WeakMap(); // AccessToken issued by token exchange -> its extra claims

function buildProvider() {
  const provider = new Provider(state.issuer, {
    clients: [...state.clients.values()].map((client) => structuredClone(client)),
    jwks: { keys: state.keys },
    cookies: {
      keys: state.cookieKeys,
      // ARVIS's console may run on 127.0.0.1 too; cookies ignore ports, so keep names apart.
      names: {
        session: 'idp_session',
        interaction: 'idp_interaction',
        resume: 'idp_interaction_resume',
      },
    },
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username'],
      email: ['email', 'email_verified'],
      arvis: claimNames(),
    },
    // The ID token carries the claims its scopes name (the console reads them from it).
    conformIdTokenClaims: false,
    scopes: ['openid', 'offline_access', 'profile', 'email', 'arvis'],
    responseTypes: ['code'],
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      rpInitiatedLogout: {
        enabled: true,
        // The library's own pages load a web font; these load nothing from outside.
        async logoutSource(ctx, form) {
          ctx.body = page('Sign out', `<h1>Sign out of the test identity provider?</h1>
${form}
<button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
        },
        async postLogoutSuccessSource(ctx) {
          ctx.body = page('Signed out', '<h1 id="signed-out">You are signed out.</h1>');
        },
      },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        async defaultResource(ctx, client, oneOf) {
          if (oneOf) return oneOf;
          return client.default_resource ?? undefined;
        },
        async getResourceServerInfo(ctx, indicator) {
          const resource = state.resources.get(indicator);
          if (!resource) throw new errors.InvalidTarget(`unknown resource indicator ${indicator}`);
          return resourceServerInfo(resource);
        },
        async useGrantedResource() {
          return true;
        },
      },
    },
    extraClientMetadata: {
      properties: ['arvis_claims', 'default_resource', 'token_exchange_subject_audiences'],
      validator(ctx, key, value) {
        if (value === undefined) return;
        const bad = (message) => { throw new errors.InvalidClientMetadata(`${key} ${message}`); };
        if (key === 'arvis_claims') {
          if (typeof value !== 'object' || value === null || Array.isArray(value)) bad('must be an object');
          try {
            checkClaims(value, key);
          } catch (err) {
            throw new errors.InvalidClientMetadata(err.message);
          }
        } else if (key === 'default_resource') {
          if (typeof value !== 'string') bad('must be a string');
        } else if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
          bad('must be an array of strings');
        }
      },
    },
    async findAccount(ctx, sub) {
      const entry = state.users.get(sub);
      if (!entry) return undefined;
      return {
        accountId: sub,
        async claims() {
          return { sub, ...entry.claims };
        },
      };
    },
    async extraTokenClaims(ctx, token) {
      if (exchanged.has(token)) return exchanged.get(token);
      if (token.kind === 'ClientCredentials') {
        const client = token.client ?? ctx?.oidc?.client;
        return tokenClaims(client?.arvis_claims);
      }
      if (token.accountId) return tokenClaims(state.users.get(token.accountId)?.claims);
      return undefined;
    },
    formats: {
      customizers: {
        async jwt(ctx, token, jwt) {
          jwt.payload.nbf ??= jwt.payload.iat;
        },
      },
    },
    interactions: {
      url(ctx, interaction) {
        return `/interaction/${interaction.uid}`;
      },
    },
    ttl: {
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      IdToken: 600,
    },
    renderError(ctx, out) {
      ctx.type = 'html';
      ctx.body = page('Error', `<h1>Error</h1><p id="error">${escape(out.error)}: ${escape(out.error_description ?? '')}</p>`);
    },
  });
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  // invalid_grant answers say only "grant request is invalid" (the library keeps the
  // reason from the client); the log says why.
  provider.on('grant.error', (ctx, err) => console.error('grant.error', err.error, err.error_detail ?? err.error_description));
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    (ctx) => tokenExchange(provider, ctx),
    [
      'audience', 'resource', 'scope', 'requested_token_type', 'subject_token',
      'subject_token_type', 'actor_token', 'actor_token_type',
    ],
    ['audience', 'resource'],
  );
  return { provider, handle: provider.callback() };
}

let current; // { provider, handle }

function rebuild() {
  current = buildProvider();
}

// ---------------------------------------------------------------------------------------
// RFC 8693 token exchange. The subject (and actor) token must be a JWT this issuer signed
// with a key it still publishes; the issued token is a JWT access token for exactly one
// audience, with the subject's sub and directory claims and, given an actor, an `act`.

const ACCEPTED_TOKEN_TYPES = new Set(Object.values(TOKEN_TYPE));

async function verifyOwnToken(token, type, label) {
  if (!ACCEPTED_TOKEN_TYPES.has(type)) {
    throw new errors.InvalidRequest(`unsupported ${label}_type`);
  }
  const jwks = jose.createLocalJWKSet({ keys: state.keys.map(publicJwk) });
  try {
    const { payload, protectedHeader } = await jose.jwtVerify(token, jwks, {
      issuer: state.issuer,
      algorithms: SIGNING_ALGS,
      clockTolerance: 5,
    });
    if (type === TOKEN_TYPE.access_token && protectedHeader.typ !== 'at+jwt') {
      throw new Error('not a JWT access token');
    }
    if (typeof payload.sub !== 'string' || !payload.sub) throw new Error('no sub');
    return payload;
  } catch (err) {
    throw new errors.InvalidGrant(`${label} is invalid (${err.code ?? err.message})`);
  }
}

function audiences(payload) {
  if (Array.isArray(payload.aud)) return payload.aud;
  return payload.aud === undefined ? [] : [payload.aud];
}

function asList(value) {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

function resolveTarget(params) {
  const targets = [
    ...asList(params.resource).map((identifier) => ({ identifier })),
    ...asList(params.audience).map((audience) => ({ audience })),
  ];
  if (targets.length === 0) {
    throw new errors.InvalidTarget('an audience or resource parameter is required');
  }
  const found = new Map();
  for (const target of targets) {
    let resource;
    if (target.identifier) {
      resource = state.resources.get(target.identifier);
    } else {
      resource = state.resources.get(target.audience)
        ?? [...state.resources.values()].find((entry) => entry.audience === target.audience);
    }
    if (!resource) {
      throw new errors.InvalidTarget(`unknown ${target.identifier ? 'resource' : 'audience'} ${target.identifier ?? target.audience}`);
    }
    found.set(resource.identifier, resource);
  }
  if (found.size !== 1) {
    throw new errors.InvalidTarget('a token exchange issues a token for exactly one audience');
  }
  return [...found.values()][0];
}

async function tokenExchange(provider, ctx) {
  const { params, client } = ctx.oidc;
  for (const name of ['subject_token', 'subject_token_type']) {
    if (!params[name]) throw new errors.InvalidRequest(`missing required parameter '${name}'`);
  }
  if (params.requested_token_type
      && ![TOKEN_TYPE.access_token, TOKEN_TYPE.jwt].includes(params.requested_token_type)) {
    throw new errors.InvalidRequest('unsupported requested_token_type');
  }
  const subject = await verifyOwnToken(params.subject_token, params.subject_token_type, 'subject_token');
  const accepted = client.token_exchange_subject_audiences ?? [];
  if (!audiences(subject).some((aud) => accepted.includes(aud))) {
    throw new errors.InvalidGrant('subject_token was not issued for an audience this client may exchange');
  }

  let actor;
  if (params.actor_token) {
    if (!params.actor_token_type) throw new errors.InvalidRequest("missing required parameter 'actor_token_type'");
    actor = await verifyOwnToken(params.actor_token, params.actor_token_type, 'actor_token');
  } else if (params.actor_token_type) {
    throw new errors.InvalidRequest('actor_token_type given without actor_token');
  }
  // RFC 8693 §4.4: a subject token that names who may act for it is binding.
  if (actor && subject.may_act && subject.may_act.sub !== actor.sub) {
    throw new errors.InvalidGrant('the actor is not allowed to act for the subject (may_act)');
  }

  const resource = resolveTarget(params);
  const allowed = new Set(resource.scope.split(' ').filter(Boolean));
  let scope = [...allowed];
  if (params.scope) {
    scope = params.scope.split(' ').filter(Boolean);
    const refused = scope.filter((value) => !allowed.has(value));
    if (refused.length) throw new errors.InvalidScope(`scope not available for this audience: ${refused.join(' ')}`);
  }

  // Never outlive the subject token.
  const now = Math.floor(Date.now() / 1000);
  const expiresIn = Math.max(1, Math.min(resource.ttl, (subject.exp ?? now + resource.ttl) - now));
  const token = new provider.AccessToken({
    accountId: subject.sub,
    client,
    gty: 'token_exchange',
    scope: scope.join(' ') || undefined,
    expiresIn,
  });
  token.resourceServer = new provider.ResourceServer(resource.identifier, resourceServerInfo(resource));

  const claims = tokenClaims(subject);
  delete claims.may_act; // it spoke about the subject token, not the one issued
  let act = subject.act;
  if (actor) {
    act = { sub: actor.sub };
    if (actor.client_id && actor.client_id !== actor.sub) act.client_id = actor.client_id;
    if (subject.act) act.act = subject.act;
  }
  if (act) claims.act = act;
  exchanged.set(token, claims);

  ctx.oidc.entity('AccessToken', token);
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: TOKEN_TYPE.access_token,
    token_type: 'Bearer',
    expires_in: token.expiration,
    ...(token.scope ? { scope: token.scope } : {}),
  };
}

// ---------------------------------------------------------------------------------------
// HTML

function escape(value) {
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)} - test identity provider</title>
<style>body{font-family:sans-serif;max-width:28em;margin:3em auto}label,input,button{display:block;margin:.4em 0}
.error{color:#a00}</style></head>
<body>${body}</body></html>`;
}

function loginPage(uid, client, params, { error, username } = {}) {
  const hint = username ?? params.login_hint ?? '';
  return page('Sign in', `
<h1>Sign in to ${escape(client?.clientName ?? params.client_id)}</h1>
<p>Test identity provider at ${escape(state.issuer)}. Requested scope: <code>${escape(params.scope ?? '')}</code></p>
${error ? `<p class="error" role="alert" id="login-error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login" id="login-form">
  <label for="username">Username</label>
  <input id="username" name="username" autocomplete="username" value="${escape(hint)}" required autofocus>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>
<p><a href="/interaction/${escape(uid)}/abort">Cancel</a></p>`);
}

// ---------------------------------------------------------------------------------------
// Plain HTTP helpers for the routes that are ours (interactions, admin).

const MAX_BODY = 1 << 20;

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) throw Object.assign(new Error('request body too large'), { status: 413 });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(res, status, body, type = 'text/html; charset=utf-8') {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' ? type : 'application/json',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(data),
  });
  res.end(data);
}

// ---------------------------------------------------------------------------------------
// Interactions: a login form (any configured user with the right password), then consent,
// which is granted at once: every configured client is first-party.

async function interaction(req, res, url) {
  const { provider } = current;
  const [, , uid, action] = url.pathname.split('/');
  try {
    if (req.method === 'GET' && !action) {
      const details = await provider.interactionDetails(req, res);
      const client = await provider.Client.find(details.params.client_id);
      if (details.prompt.name === 'login') {
        return send(res, 200, loginPage(details.uid, client, details.params));
      }
      if (details.prompt.name === 'consent') {
        return await grantConsent(provider, req, res, details);
      }
      return send(res, 400, page('Error', `<p id="error">unknown prompt ${escape(details.prompt.name)}</p>`));
    }
    if (req.method === 'POST' && action === 'login') {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name !== 'login') {
        return send(res, 400, page('Error', '<p id="error">this interaction does not ask for a login</p>'));
      }
      const form = new URLSearchParams(await readBody(req));
      const username = form.get('username') ?? '';
      const entry = state.users.get(username);
      const given = Buffer.from(form.get('password') ?? '');
      const expected = Buffer.from(entry?.password ?? '');
      if (!entry || given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
        const client = await provider.Client.find(details.params.client_id);
        return send(res, 401, loginPage(details.uid, client, details.params, {
          error: 'Unknown user or wrong password.',
          username,
        }));
      }
      return await provider.interactionFinished(req, res, {
        login: { accountId: entry.sub, amr: ['pwd'], remember: true },
      }, { mergeWithLastSubmission: false });
    }
    if (req.method === 'GET' && action === 'abort') {
      return await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: 'End-User aborted interaction',
      }, { mergeWithLastSubmission: false });
    }
    return send(res, 404, page('Not found', '<p id="error">no such interaction route</p>'));
  } catch (err) {
    const status = err.status ?? 500;
    if (status >= 500) console.error(`interaction ${uid}:`, err);
    return send(res, status, page('Error', `<h1>Error</h1><p id="error">${escape(err.error ?? 'error')}: ${escape(err.error_description ?? err.message)}</p>`));
  }
}

async function grantConsent(provider, req, res, details) {
  const { prompt: { details: missing }, params, session } = details;
  let grant;
  if (details.grantId) {
    grant = await provider.Grant.find(details.grantId);
  } else {
    grant = new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  }
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  if (missing.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  const grantId = await grant.save();
  const consent = details.grantId ? {} : { grantId };
  return provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
}

// ---------------------------------------------------------------------------------------
// Admin API for tests (Bearer admin token; the server listens on loopback only).

function snapshot() {
  const signing = {};
  for (const alg of SIGNING_ALGS) signing[alg] = state.keys.find((jwk) => signsWith(jwk, alg))?.kid;
  return {
    issuer: state.issuer,
    clients: [...state.clients.values()],
    users: [...state.users.values()],
    resources: [...state.resources.values()],
    signing_kids: signing,
    jwks: { keys: state.keys.map(publicJwk) },
  };
}

async function admin(req, res, url) {
  const given = Buffer.from(req.headers.authorization ?? '');
  const expected = Buffer.from(`Bearer ${state.adminToken}`);
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
    return send(res, 401, { error: 'invalid_token', error_description: 'admin token required' });
  }
  const parts = url.pathname.split('/').slice(2).map(decodeURIComponent);
  try {
    const raw = req.method === 'GET' || req.method === 'DELETE' ? '' : await readBody(req);
    const body = raw ? JSON.parse(raw) : {};
    const route = `${req.method} ${parts[0] ?? ''}${parts.length > 1 ? '/:id' : ''}`;
    switch (route) {
      case 'GET state':
        return send(res, 200, snapshot());
      case 'PUT clients/:id': {
        // Creates or replaces a client's metadata (merged over what it had), then rebuilds
        // the provider so the library validates it as a statically configured client.
        const previous = state.clients.get(parts[1]);
        const candidate = { ...(body.replace ? {} : previous ?? {}), ...body.metadata, client_id: parts[1] };
        const saved = new Map(state.clients);
        state.clients.set(parts[1], candidate);
        try {
          rebuild();
          const client = await current.provider.Client.find(parts[1]);
          if (!client) throw new Error('client not found after rebuild');
        } catch (err) {
          state.clients = saved;
          rebuild();
          return send(res, 400, { error: 'invalid_client_metadata', error_description: err.error_description ?? err.message });
        }
        return send(res, 200, state.clients.get(parts[1]));
      }
      case 'DELETE clients/:id':
        state.clients.delete(parts[1]);
        rebuild();
        return send(res, 204, '');
      case 'PUT users/:id': {
        const entry = checkUser({ ...body, sub: parts[1] });
        state.users.set(entry.sub, entry);
        rebuild(); // its claim names may be new to the `arvis` scope
        return send(res, 200, entry);
      }
      case 'DELETE users/:id':
        state.users.delete(parts[1]);
        return send(res, 204, '');
      case 'PUT resources': {
        const entry = checkResource(body);
        state.resources.set(entry.identifier, entry);
        return send(res, 200, entry);
      }
      case 'POST rotate-keys': {
        // New keys go first (they sign from now on). The previous ones stay published, for
        // tokens already issued, unless {"retain_previous": false}.
        const fresh = body.jwks ? checkPrivateJwks(body.jwks, 'rotate-keys') : generateSigningKeys();
        state.keys = body.retain_previous === false ? fresh : [...fresh, ...state.keys];
        rebuild();
        return send(res, 200, snapshot());
      }
      default:
        return send(res, 404, { error: 'not_found', error_description: `no admin route ${route}` });
    }
  } catch (err) {
    return send(res, err.status ?? 400, { error: 'invalid_request', error_description: err.message });
  }
}

// ---------------------------------------------------------------------------------------
// Start

function readConfig(values) {
  const file = values.config ?? process.env.ARVIS_OIDC_CONFIG;
  const config = file ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  const port = Number(values.port ?? process.env.ARVIS_OIDC_PORT ?? config.port ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad port ${port}`);
  return { config, port };
}

async function main() {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      config: { type: 'string' },
      'exit-with-stdin': { type: 'boolean' },
    },
    strict: true,
  });
  const { config, port } = readConfig(values);

  state.adminToken = config.admin_token ?? crypto.randomBytes(24).toString('base64url');
  state.keys = config.jwks ? checkPrivateJwks(config.jwks, 'config.jwks') : generateSigningKeys();
  state.clients = mergeBy(DEFAULTS.clients, config.clients, 'client_id');
  state.users = new Map([...mergeBy(DEFAULTS.users, config.users, 'sub').values()]
    .map((entry) => [entry.sub, checkUser(entry)]));
  state.resources = new Map([...mergeBy(DEFAULTS.resources, config.resources, 'identifier').values()]
    .map((entry) => [entry.identifier, checkResource(entry)]));

  const server = http.createServer((req, res) => {
    if (!current) return send(res, 503, 'starting', 'text/plain');
    const url = new URL(req.url, 'http://127.0.0.1');
    if (process.env.ARVIS_OIDC_DEBUG) console.error(req.method, url.pathname);
    if (url.pathname.startsWith('/_admin/')) return void admin(req, res, url);
    if (url.pathname.startsWith('/interaction/')) return void interaction(req, res, url);
    return current.handle(req, res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const { port: bound } = server.address();
  state.issuer = `http://127.0.0.1:${bound}`;
  rebuild();
  // Every client must pass the library's metadata validation before we say "ready".
  for (const clientId of state.clients.keys()) {
    if (!(await current.provider.Client.find(clientId))) throw new Error(`client ${clientId} did not load`);
  }

  const stop = () => {
    server.closeAllConnections?.();
    server.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (values['exit-with-stdin']) {
    process.stdin.on('end', stop);
    process.stdin.on('close', stop);
    process.stdin.resume();
  }

  process.stdout.write(`${JSON.stringify({
    ready: true,
    pid: process.pid,
    port: bound,
    admin_token: state.adminToken,
    ...snapshot(),
  })}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
