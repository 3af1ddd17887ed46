// The page at `/`: a small live status view (version, validation loss, volunteers, work
// units) that polls /api/v1/stats. The full dashboard replaces it (dashboard issue).
#pragma once

#include <string_view>

namespace tessera::server {

inline constexpr std::string_view kStatusPage = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tessera run</title>
<style>
 body { font: 16px system-ui, sans-serif; margin: 2rem auto; max-width: 40rem; padding: 0 1rem; }
 @media (prefers-color-scheme: dark) { body { background: #111; color: #ddd; } }
 dl { display: grid; grid-template-columns: max-content 1fr; gap: .4rem 1.5rem; }
 dt { opacity: .7; } dd { margin: 0; font-variant-numeric: tabular-nums; }
</style></head>
<body><h1>Tessera run</h1>
<dl>
 <dt>task</dt><dd id="task">…</dd>
 <dt>model version</dt><dd id="version">…</dd>
 <dt>validation loss</dt><dd id="loss">…</dd>
 <dt>volunteers active / total</dt><dd id="volunteers">…</dd>
 <dt>work units</dt><dd id="units">…</dd>
 <dt>rejections</dt><dd id="rejections">…</dd>
</dl>
<p>JSON: <a href="/api/v1/stats">stats</a>, <a href="/api/v1/versions">versions</a>,
<a href="/api/v1/volunteers">volunteers</a>, <a href="/api/v1/rejections">rejections</a>, <a href="/metrics">metrics</a></p>
<script>
async function refresh() {
  try {
    const s = await (await fetch('/api/v1/stats')).json();
    const set = (id, text) => { document.getElementById(id).textContent = text; };
    set('task', s.task ? `${s.task.id} (${s.task.model}, ${s.task.policy}, ${s.task.state})` : 'none');
    set('version', s.version);
    set('loss', s.validation_loss === null ? 'not yet evaluated'
        : `${s.validation_loss.toFixed(4)} (version ${s.evaluated_version})`);
    set('volunteers', `${s.volunteers_active} / ${s.volunteers}`);
    set('units', Object.entries(s.work_units).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none yet');
    set('rejections', s.rejections);
  } catch (e) { /* the server restarts: try again */ }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
)html";

}  // namespace tessera::server
