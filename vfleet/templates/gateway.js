// The gateway's request checks in nginx's JavaScript (njs, Debian's libnginx-mod-http-js).
// Installed as /etc/nginx/vfleet/gateway.js (mode 0600, read by nginx's master at load),
// after the line `var S = {...};` that vfleet/roles/gateway/_njs.py writes above this code:
//   S.models  {name: {i: upstream index, max_tokens: ceiling|null, fallback: name|null}}
//   S.tenants {name: {models: [names]|null, max_tokens: ceiling|null, i: index}} or null
//   S.keys    {sha256 hex of a client key: tenant name}
//   S.backend the Authorization value vLLM expects (tenant mode), or null
//   S.list    GET /v1/models entries, in vLLM's shape
// Why njs: the body checks read JSON with a real parser (JSON.parse), so a field named
// max_tokens inside a schema or a tool definition is not mistaken for the request's own.
// Every function here returns a word the nginx config maps to an upstream or an answer:
// nothing here builds a response text from the client's input.

var crypto = require('crypto');

var FIELD_WORDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'];
// where a tenant's ceiling is written into a request that gives none, by API path
var CEILING_FIELD = {'/v1/chat/completions': 'max_tokens', '/v1/completions': 'max_tokens',
                     '/v1/responses': 'max_output_tokens'};

// What one request's body says, read once: every variable below asks for it (njs gives each
// request a VM of its own, so this is per request).
var parsed = null;

// A table's own entry: a client's "constructor" or "__proto__" is no model and no tenant.
function own(table, name) {
    return Object.prototype.hasOwnProperty.call(table, name) ? table[name] : undefined;
}

function bearer(r) {
    var h = r.headersIn.Authorization || '';
    var m = /^Bearer +([!-~]{1,4096}) *$/.exec(h);
    return m ? m[1] : '';
}

// $vfleet_tenant: the tenant whose key the client sent ("" when none or unknown).
function tenant(r) {
    if (!S.tenants) {
        return '';
    }
    var key = bearer(r);
    if (!key) {
        return '';
    }
    var name = own(S.keys, crypto.createHash('sha256').update(key).digest('hex'));
    return name || '';
}

// Where the JSON string that opens at `i` closes (its quote): from quote to quote, skipping
// the escaped ones (an odd run of backslashes before a quote escapes it).
function stringEnd(text, i) {
    var j = text.indexOf('"', i + 1);
    for (;;) {
        var b = j - 1;
        while (text[b] === '\\') {
            b--;
        }
        if ((j - 1 - b) % 2 === 0) {
            return j;
        }
        j = text.indexOf('"', j + 1);
    }
}

// The top-level keys of a JSON object text, each with where its value starts. The text was
// already parsed by JSON.parse: only strings, nesting and the colon after a key matter here.
function topLevelKeys(text) {
    var depth = 0, keys = [], i = 0, n = text.length;
    while (i < n) {
        var c = text[i];
        if (c === '"') {
            var j = stringEnd(text, i);
            if (depth === 1) {
                var k = j + 1;
                while (k < n && ' \t\r\n'.indexOf(text[k]) >= 0) {
                    k++;
                }
                if (text[k] === ':') {
                    k++;
                    while (k < n && ' \t\r\n'.indexOf(text[k]) >= 0) {
                        k++;
                    }
                    keys.push({key: JSON.parse(text.slice(i, j + 1)), value: k});
                }
            }
            i = j + 1;
            continue;
        }
        if (c === '{' || c === '[') {
            depth++;
        } else if (c === '}' || c === ']') {
            depth--;
        }
        i++;
    }
    return keys;
}

// A top-level key given twice: JSON.parse keeps the last silently (ECMA-404 leaves duplicates
// open, and parsers disagree), so the gateway refuses the ambiguity.
function repeatsTopLevelKey(text) {
    var seen = {};
    return topLevelKeys(text).some(function (k) {
        var again = seen[k.key] === 1;
        seen[k.key] = 1;
        return again;
    });
}

function body(r) {
    if (parsed === null) {
        parsed = readBody(r);
    }
    return parsed;
}

function readBody(r) {
    var text = r.requestText;
    if (text === undefined || text === null || text === '') {
        if (r.method === 'GET' || r.method === 'HEAD') {
            return {o: {}, text: ''};      // GET /v1/<prefix>/models: the path names the model
        }
        return {error: r.variables.request_body_file ? 'body_unread' : 'invalid_json'};
    }
    var o;
    try {
        o = JSON.parse(text);
    } catch (e) {
        return {error: 'invalid_json'};
    }
    if (o === null || typeof o !== 'object' || Array.isArray(o)) {
        return {error: 'invalid_json'};
    }
    if (repeatsTopLevelKey(text)) {
        return {error: 'field_repeated'};
    }
    return {o: o, text: text};
}

// $vfleet_model: the model the request names: the route prefix's, else the body's "model".
function model(r) {
    var byPath = r.variables.vfleet_path_model;
    if (byPath) {
        return byPath;
    }
    var b = body(r);
    var name = b.o ? b.o.model : undefined;
    return typeof name === 'string' && /^[A-Za-z0-9._:\/@+-]{1,128}$/.test(name) ? name : '';
}

function ceiling(a, b) {
    if (a === null || a === undefined) {
        return b;
    }
    return b === null || b === undefined ? a : Math.min(a, b);
}

function tenantOf(r) {
    return S.tenants ? own(S.tenants, r.variables.vfleet_tenant) : null;
}

// The verdict for one model: ok_<i>, or the name of the gateway's answer.
function judge(r, name, o) {
    var m = own(S.models, name);
    var t = tenantOf(r);
    if (S.tenants && !t) {
        return 'unauthorized';
    }
    if (!m || (t && t.models && t.models.indexOf(name) < 0)) {
        return 'model_not_found';
    }
    var given = FIELD_WORDS.filter(function (f) { return o[f] !== undefined && o[f] !== null; });
    if (given.length > 1) {
        return 'max_tokens_twice';
    }
    var most = ceiling(m.max_tokens, t ? t.max_tokens : null);
    if (given.length && most !== null && most !== undefined) {
        var v = o[given[0]];
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > most) {
            return t && t.max_tokens !== null && t.max_tokens < (m.max_tokens === null ? Infinity : m.max_tokens)
                ? 'tenant_max_tokens_' + t.i : 'max_tokens_' + m.i;
        }
    }
    return 'ok_' + m.i;
}

// $vfleet_verdict: evaluated in the content phase (proxy_pass), after `mirror` read the body.
function verdict(r) {
    var b = body(r);
    if (b.error) {
        return S.tenants && !tenantOf(r) ? 'unauthorized' : b.error;
    }
    return judge(r, model(r), b.o);
}

// $vfleet_fallback_verdict: the fallback model's verdict when the request's own model had no
// host to take it ("" when it has no fallback, or the fallback refuses the request).
function fallbackVerdict(r) {
    var name = fallbackModel(r);
    if (!name) {
        return '';
    }
    var v = judge(r, name, body(r).o);
    return v.indexOf('ok_') === 0 ? v : '';
}

// $vfleet_fallback_model: the name of the model a request falls back to ("" when none).
function fallbackModel(r) {
    var b = body(r);
    var m = b.o ? own(S.models, model(r)) : undefined;
    return m && m.fallback && r.variables.vfleet_verdict === 'ok_' + m.i ? m.fallback : '';
}

// $vfleet_body_out (tenant mode): the request as vLLM gets it. A tenant with a max_tokens
// ceiling whose request gives none gets the ceiling written in, first thing in the object:
// leaving the field out must not mean no limit for that key. Every other byte is the client's.
function bodyOut(r) {
    var b = body(r);
    var t = tenantOf(r);
    var field = CEILING_FIELD[r.variables.vfleet_api_path];
    if (!b.o || !t || t.max_tokens === null || !field ||
        FIELD_WORDS.some(function (f) { return b.o[f] !== undefined && b.o[f] !== null; })) {
        return b.text || '';
    }
    var open = b.text.indexOf('{');
    var rest = b.text.slice(open + 1);
    var comma = Object.keys(b.o).length ? ',' : '';
    return b.text.slice(0, open + 1) + JSON.stringify(field) + ':' + t.max_tokens + comma + rest;
}

// $vfleet_fallback_body: the request as the fallback's hosts must get it, naming their model.
// Only the top-level "model" string is replaced, in the text: every other byte stays as the
// client sent it (a re-serialised object would round large integers, a seed, to doubles).
function fallbackBody(r) {
    var text = S.tenants ? bodyOut(r) : (body(r).text || '');
    var name = fallbackModel(r);
    var at = topLevelKeys(text).filter(function (k) { return k.key === 'model'; })[0];
    if (!name || !at || text[at.value] !== '"') {
        return text;
    }
    return text.slice(0, at.value) + JSON.stringify(name) + text.slice(stringEnd(text, at.value) + 1);
}

// $vfleet_backend_auth: what the gateway sends vLLM in tenant mode (the client's key never is).
function backendAuth(r) {
    return S.backend || '';
}

// $vfleet_answered_by (access log): the model whose host answered, "" when none did.
function answeredBy(r) {
    var route = r.variables.vfleet_route;
    if (route === 'fallback') {
        return fallbackModel(r);
    }
    return route === 'primary' ? model(r) : '';
}

// $vfleet_error_kind (access log): why a request failed, in a few words usage can count.
function errorKind(r) {
    var status = Number(r.variables.status);
    if (status < 400) {
        return '';
    }
    if (status === 429) {
        return r.variables.limit_conn_status === 'REJECTED' ? 'concurrency_limited' : 'rate_limited';
    }
    if (status === 401) {
        return 'unauthorized';
    }
    if (status === 499) {
        return 'client_closed';
    }
    var route = r.variables.vfleet_route;
    if (route === 'primary' || route === 'fallback') {
        return 'upstream';
    }
    if (route === 'none') {
        return status === 404 ? 'model_not_found' : status === 503 ? 'unavailable' : 'bad_request';
    }
    return status === 404 ? 'not_found' : 'bad_request';
}

// GET /v1/models in tenant mode: the models this tenant may use, in vLLM's shape.
function models(r) {
    var t = tenantOf(r);
    var data = S.list.filter(function (e) { return !t.models || t.models.indexOf(e.id) >= 0; });
    r.headersOut['Content-Type'] = 'application/json';
    r.return(200, JSON.stringify({object: 'list', data: data}) + '\n');
}

export default {tenant, model, verdict, fallbackVerdict, fallbackModel, bodyOut, fallbackBody, backendAuth, answeredBy, errorKind,
                models};
