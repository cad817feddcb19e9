// A real OpenID Connect provider for the portal's single sign-on tests: panva's oidc-provider
// (OpenID Certified), with a sign-in page of its own that checks a password, so that the portal
// is tested against the protocol as an identity provider speaks it, not a mock of it.
//
//   node provider.mjs CONFIG.json
//
// CONFIG.json: {"port": 0-65535, "issuer": "http://127.0.0.1:PORT", "clients": [client
// metadata...], "accounts_file": "accounts.json"}. The accounts file is read again at each
// sign-in and each claims lookup, so that a test changes a user's groups "at the provider"
// by rewriting it: {"alice-sso": {"password": "...", "claims": {"preferred_username": ...,
// "email": ..., "groups": [...]}}}. The account's name is its subject (sub).
//
// What it serves: discovery (/.well-known/openid-configuration), authorization (/auth) with
// the sign-in page (/interaction/UID), token, userinfo (/me), JWKS (/jwks) and RP-initiated
// logout (/session/end); first-party clients: no consent page.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));

function accounts() {
  return JSON.parse(readFileSync(config.accounts_file, 'utf8'));
}

async function findAccount(ctx, sub) {
  const account = accounts()[sub];
  if (!account) {
    return undefined; // removed at the provider: its tokens answer no claims
  }
  return {
    accountId: sub,
    async claims() {
      return { ...account.claims, sub };
    },
  };
}

// The test's clients are the lab's own portal: its users are not asked to consent to it.
async function loadExistingGrant(ctx) {
  const { client, session, params, result } = ctx.oidc;
  const grantId = result?.consent?.grantId || session.grantIdFor(client.clientId);
  const grant = (grantId && (await ctx.oidc.provider.Grant.find(grantId)))
    || new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
  grant.addOIDCScope(params.scope);
  await grant.save();
  return grant;
}

const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: { keys: [{ ...signingKey.export({ format: 'jwk' }), kid: 'tests-rs256', use: 'sig', alg: 'RS256' }] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: true },
  },
  pkce: { required: () => true },
  findAccount,
  loadExistingGrant,
});

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function signInPage(uid, clientId, error) {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test IdP: sign in</title></head>
<body>
  <h1>Test IdP</h1>
  <p>Sign in to continue to ${escape(clientId)}.</p>
  ${error ? `<p id="error">${escape(error)}</p>` : ''}
  <form method="post" action="/interaction/${escape(uid)}/login">
    <label for="login">Username</label> <input id="login" name="login" autofocus>
    <label for="password">Password</label> <input id="password" name="password" type="password">
    <button type="submit">Sign in at the IdP</button>
  </form>
</body></html>`;
}

async function formBody(req) {
  const chunks = [];
  for await (const chunk of req) {
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid || details.prompt.name !== 'login') {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(`no sign-in pending for ${uid}`);
    return;
  }
  if (action === 'login' && req.method === 'POST') {
    const form = await formBody(req);
    const login = form.get('login') || '';
    const account = accounts()[login];
    if (account && account.password === form.get('password')) {
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: login } },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    const page = signInPage(uid, details.params.client_id, 'Wrong username or password.');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
    return;
  }
  const page = signInPage(uid, details.params.client_id, '');
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
}

const handle = provider.callback();
const server = createServer((req, res) => {
  const match = /^\/interaction\/([\w-]+)(?:\/(login))?$/.exec(new URL(req.url, config.issuer).pathname);
  if (!match) {
    handle(req, res);
    return;
  }
  interaction(req, res, match[1], match[2]).catch((error) => {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(`${error.name}: ${error.message}`);
  });
});
server.listen(config.port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${config.issuer}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
