/** Minimal HTML helpers of the sign-in and error pages: plain styling, readable on a phone, no scripts. */
export function escapeHtml(v: unknown): string {
  return String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d1d1f;background:#f4f4f6}
main{max-width:30rem;margin:0 auto;padding:1.5rem 1rem}
.card{background:#fff;border:1px solid #ddd;border-radius:10px;padding:1.25rem}
h1{font-size:1.4rem;margin:0 0 .75rem}
label{display:block;font-weight:600;margin:.75rem 0 .25rem}
input[type=password],input[type=text]{width:100%;padding:.7rem;font-size:1rem;border:1px solid #bbb;border-radius:6px}
fieldset{border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.5rem .75rem}
legend{font-weight:600;padding:0 .25rem}
.scope{display:flex;gap:.5rem;align-items:flex-start;font-weight:400;margin:.4rem 0}
.scope input{margin-top:.35rem;width:1.1rem;height:1.1rem}
code{font-size:.85em;color:#555}
.hint{color:#555;font-size:.9rem;margin:.25rem 0}
.err{color:#a40000;background:#fff0f0;border:1px solid #f0c0c0;border-radius:6px;padding:.5rem .75rem}
.buttons{display:flex;gap:.75rem;margin-top:1rem}
button{flex:1;padding:.8rem;font-size:1rem;border-radius:6px;border:1px solid #1d4ed8;background:#1d4ed8;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#1d1d1f;border-color:#bbb}
`;

export function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${escapeHtml(title)} · imagegen</title>
<style>${STYLE}</style>
</head>
<body><main><div class="card">
${body}
</div></main></body>
</html>`;
}

/** Security headers of every HTML page we serve (no framing, no referrer, no caching, no scripts). */
export const HTML_HEADERS: Record<string, string> = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
};
