// Tessera dashboard: reads the JSON API, draws uPlot charts, and refreshes whenever the
// server's event stream (/api/v1/events/stream, server-sent events) reports something.
// Untrusted text (volunteer names, rejection details) is only ever set as textContent.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  // The browser test reads the charts' data from here.
  // The task shown: ?task=ID (each task's page), else the current one (the newest unfinished).
  const dashboard = { charts: {}, data: {}, lastEventId: 0, refreshes: 0, samplesVersion: null,
    taskId: new URLSearchParams(location.search).get('task') };
  window.tesseraDashboard = dashboard;
  // The task's API routes, or the current task's.
  const taskApi = () => dashboard.taskId ? `/api/v1/tasks/${encodeURIComponent(dashboard.taskId)}` : '/api/v1';
  let clockOffset = 0;  // server time − local time, seconds

  // ---- formatting ----
  const nowServer = () => Date.now() / 1000 + clockOffset;
  function compact(n, digits = 1) {
    if (n === null || n === undefined || Number.isNaN(n)) return '–';
    const abs = Math.abs(n);
    if (abs >= 1e9) return (n / 1e9).toFixed(digits) + 'G';
    if (abs >= 1e6) return (n / 1e6).toFixed(digits) + 'M';
    if (abs >= 1e4) return (n / 1e3).toFixed(digits) + 'k';
    return Number.isInteger(n) ? String(n) : n.toFixed(digits);
  }
  function duration(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    const d = Math.floor(seconds / 86400), h = Math.floor(seconds / 3600) % 24;
    const m = Math.floor(seconds / 60) % 60, s = seconds % 60;
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${m}m`;
    if (m) return `${m}m ${s}s`;
    return `${s}s`;
  }
  const ago = (t) => (t ? duration(nowServer() - t) + ' ago' : 'never');
  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, props);
    for (const child of children) node.append(child);
    return node;
  }
  function setText(id, text) { $(id).textContent = text; }

  async function getJson(path) {
    const response = await fetch(path, { cache: 'no-store' });
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  }

  // ---- charts ----
  function colors() {
    const style = getComputedStyle(document.documentElement);
    const v = (name) => style.getPropertyValue(name).trim();
    return { fg: v('--fg'), muted: v('--muted'), grid: v('--grid'), accent: v('--accent'),
             accent2: v('--accent-2'), good: v('--good'), bad: v('--bad') };
  }
  // pad: seconds (or units) added on each side of the data's x range, so a single bucket
  // still has a sensible axis.
  const chartSpecs = {
    // Two series: cheap estimates on the first eval_samples, and whole-validation-set points.
    lossVersion: { id: 'chart-loss-version', time: false, pad: 0.5,
                   series: [{ label: 'sample', color: 'accent' }, { label: 'whole set', color: 'good' }] },
    lossTime: { id: 'chart-loss-time', time: true, pad: 5,
                series: [{ label: 'sample', color: 'accent' }, { label: 'whole set', color: 'good' }] },
    trainLoss: { id: 'chart-train-loss', time: true, pad: 30, series: [{ label: 'mean final loss', color: 'accent2' }] },
    throughput: { id: 'chart-throughput', time: true, pad: 30, series: [{ label: 'samples/s', color: 'good', fill: true }] },
    staleness: { id: 'chart-staleness', time: false, pad: 0.5, bars: true, series: [{ label: 'results', color: 'accent' }] },
    verdicts: { id: 'chart-verdicts', time: true, pad: 1800, bars: true,
                series: [{ label: 'accepted', color: 'good', align: -1 }, { label: 'rejected', color: 'bad', align: 1 }] },
  };

  const two = (n) => String(n).padStart(2, '0');
  // Time-axis labels: clock time, with seconds on short spans and dates on long ones.
  function timeLabels(u, splits) {
    const span = u.scales.x.max - u.scales.x.min;
    return splits.map((t) => {
      const d = new Date(t * 1000);
      if (span > 2 * 86400) return `${d.toLocaleString(undefined, { month: 'short' })} ${d.getDate()}`;
      const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
      return span < 900 ? `${hm}:${two(d.getSeconds())}` : hm;
    });
  }

  function makeChart(spec, data) {
    const c = colors();
    const container = $(spec.id);
    container.replaceChildren();
    const axis = { stroke: c.muted, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid, width: 1 } };
    const series = [{}];
    for (const s of spec.series) {
      const entry = { label: s.label, stroke: c[s.color], width: 2, spanGaps: true, points: { show: true, size: 4 } };
      if (s.fill) entry.fill = c[s.color] + '33';
      if (spec.bars) {
        entry.fill = c[s.color];
        entry.paths = uPlot.paths.bars({ size: [spec.series.length > 1 ? 0.4 : 0.7, 60], align: s.align || 0 });
        entry.points = { show: false };
      }
      series.push(entry);
    }
    const xRange = (u) => {
      const xs = u.data[0];
      return xs.length ? [xs[0] - spec.pad, xs[xs.length - 1] + spec.pad] : [0, 1];
    };
    // Versions and staleness are whole numbers: integer ticks only.
    const whole = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
    const xAxis = spec.time ? { ...axis, space: 70, values: timeLabels } : { ...axis, space: 40, incrs: whole };
    const options = {
      width: Math.max(container.clientWidth, 240), height: 200,
      scales: { x: { time: spec.time, range: xRange } }, axes: [xAxis, { ...axis, size: 50 }], series,
      legend: { show: true }, cursor: { drag: { x: false, y: false } },
    };
    return new uPlot(options, data, container);
  }

  function updateChart(name, data) {
    dashboard.data[name] = data;
    const spec = chartSpecs[name];
    if (!dashboard.charts[name]) dashboard.charts[name] = makeChart(spec, data);
    else dashboard.charts[name].setData(data);
  }

  function rebuildCharts() {
    for (const [name, chart] of Object.entries(dashboard.charts)) {
      chart.destroy();
      dashboard.charts[name] = makeChart(chartSpecs[name], dashboard.data[name]);
    }
  }
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', rebuildCharts);
  const resizer = new ResizeObserver(() => {
    for (const [name, chart] of Object.entries(dashboard.charts)) {
      const width = Math.max($(chartSpecs[name].id).clientWidth, 240);
      if (Math.abs(chart.width - width) > 2) chart.setSize({ width, height: 200 });
    }
  });
  for (const spec of Object.values(chartSpecs)) resizer.observe($(spec.id));

  // ---- panels ----
  function showStats(s) {
    clockOffset = s.server_time - Date.now() / 1000;
    dashboard.lastEventId = Math.max(dashboard.lastEventId, s.last_event_id);
    const t = s.task;
    dashboard.shownTask = t ? t.id : null;
    setText('task', t ? `${t.state} · weight ${t.weight}` +
      (t.suspended_checks.length ? ` · checks suspended (a stall): ${t.suspended_checks.join(', ')}` : '') +
      (t.liveness.stalled ? ` · MERGING NOTHING for ${Math.round(t.liveness.seconds_without_merge / 60)} min; refused: ` +
        (Object.entries(t.liveness.refusals_since_merge).map(([why, n]) => `${why} ${n}`).join(', ') || 'none') : '') +
      (t.divergence ? ` · DIVERGED at version ${t.divergence.diverged_version}: ` +
        (t.divergence.returned_to === null ? '' : `back to version ${t.divergence.returned_to}, `) +
        (t.divergence.action === 'paused' ? 'task PAUSED for the operator' :
          `server lr now ${t.divergence.server_lr} (${t.divergence.recoveries} of ${t.divergence.max_recoveries})`) : '')
      : 'no task yet');
    showVersion(s.version);
    setText('loss', s.validation_loss === null ? 'not yet' : s.validation_loss.toFixed(4));
    setText('loss-note', s.validation_loss === null ? '' :
      `at version ${s.evaluated_version} · ${sampleText(s.validation_samples, s.validation_full, s.validation_set_samples)}` +
      (s.validation_accuracy !== null ? ` · accuracy ${(100 * s.validation_accuracy).toFixed(1)}%` : '') +
      (s.full_validation && !s.validation_full ? ` · whole set ${s.full_validation.loss.toFixed(4)} at version ${s.full_validation.version}` : ''));
    setText('loss-sample-note', t ? `(points: first ${compact(t.eval_samples)} validation samples; ` +
      (t.eval_full_interval_s ? `whole set every ${duration(t.eval_full_interval_s)})` : 'every point on the whole set)') : '');
    setText('samples-trained', compact(s.samples_trained));
    setText('throughput', `${compact(s.throughput.samples_per_s)} samples/s`);
    setText('wus-per-hour', `${compact(s.throughput.work_units_per_hour)} WUs/hour over ${duration(s.throughput.window_s)}`);
    setText('volunteers-count', `${s.volunteers_active} / ${s.volunteers}`);
    const w = s.work_units;
    const inFlight = w.in_progress + w.returned + w.validated;
    setText('work-units', `${inFlight} / ${w.accepted + w.merged + w.confirmed} / ${w.rejected}`);
    setText('model', t ? `${t.model} · ${compact(t.parameters, 2)} params` : '–');
    setText('policy', t ? `${t.policy} merging` : '');
    dashboard.startedAt = s.started_at;
    setText('uptime', duration(s.uptime_s));
    const b = s.state_bytes;
    setText('state-bytes', megabytes(b.total));
    setText('state-parts', `blobs ${megabytes(b.blobs)} · results ${megabytes(b.results)} · database ${megabytes(b.database)}`);
  }

  function megabytes(bytes) {
    return `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;
  }

  // Which validation samples a figure comes from: a small sample's figure is an estimate.
  function sampleText(samples, full, setSize) {
    if (full) return `whole validation set (${compact(samples)})`;
    if (samples === null) return 'sample size unknown';
    return setSize ? `first ${compact(samples)} of ${compact(setSize)} validation samples` : `${compact(samples)} validation samples`;
  }

  function showVersion(version) {
    const node = $('version');
    if (node.textContent === String(version)) return;
    node.textContent = String(version);
    node.classList.add('flash');
    setTimeout(() => node.classList.remove('flash'), 600);
  }

  function showCharts(versions, minutes, hours) {
    const evaluated = versions.versions.filter((v) => v.validation_loss !== null);
    const sample = evaluated.map((v) => (v.validation_full ? null : v.validation_loss));
    const whole = evaluated.map((v) => (v.validation_full ? v.validation_loss : null));
    updateChart('lossVersion', [evaluated.map((v) => v.version), sample, whole]);
    updateChart('lossTime', [evaluated.map((v) => v.created_at), sample, whole]);
    const b = minutes.buckets;
    updateChart('trainLoss', [b.map((x) => x.start), b.map((x) => x.train_loss)]);
    updateChart('throughput', [b.map((x) => x.start), b.map((x) => x.samples_per_s)]);
    const st = minutes.staleness;
    updateChart('staleness', [st.map((x) => x.staleness), st.map((x) => x.count)]);
    const h = hours.buckets;
    updateChart('verdicts', [h.map((x) => x.start), h.map((x) => x.accepted), h.map((x) => x.rejected)]);
  }

  function showVolunteers(list) {
    const rows = list.volunteers.map((v) => el('tr', {},
      el('td', { textContent: v.name }), el('td', { textContent: v.device || '–' }),
      el('td', { className: 'num', textContent: v.samples_per_s ? `${compact(v.samples_per_s)}/s` : '–' }),
      el('td', { className: 'num', textContent: String(v.accepted) }),
      el('td', { className: 'num', textContent: compact(v.credit) }),
      el('td', { className: 'num', textContent: String(v.valid_streak) }),
      el('td', { textContent: v.quarantined ? 'quarantined' : '' }),
      el('td', { textContent: ago(v.last_seen) })));
    $('volunteers').tBodies[0].replaceChildren(...rows);
    const top = list.volunteers.filter((v) => v.credit > 0).slice(0, 10);
    const best = top.length ? top[0].credit : 1;
    const items = top.map((v) => el('li', {},
      el('span', { className: 'credit', textContent: compact(v.credit) }), v.name,
      el('span', { className: 'bar', style: `width: ${Math.max(2, (100 * v.credit) / best)}%` })));
    if (!items.length) items.push(el('li', { className: 'muted', textContent: 'no credit granted yet' }));
    $('leaderboard').replaceChildren(...items);
    return new Map(list.volunteers.map((v) => [v.id, v.name]));
  }

  function showRejections(list, names) {
    const rows = list.rejections.map((r) => el('tr', {},
      el('td', { textContent: ago(r.at) }), el('td', { textContent: names.get(r.client_id) || r.client_id }),
      el('td', { className: 'reason', textContent: r.reason }), el('td', { className: 'detail', textContent: r.detail })));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 4, className: 'muted', textContent: 'none so far' })));
    $('rejections').tBodies[0].replaceChildren(...rows);
  }

  // Replay audits and audit twins (docs/operations.md): the totals, then the newest.
  const auditOutcome = { audit_passed: 'passed', audit_failed: 'failed', audit_twin: 'sent to a trusted volunteer',
    credit_withdrawn: 'credit withdrawn' };
  function auditDetail(e) {
    const d = e.detail;
    if (e.kind === 'credit_withdrawn') return `${compact(d.credit)} from ${d.results.length} result(s) since ${ago(d.since)}: ${d.why}`;
    if (e.kind === 'audit_failed') return `${d.assignment_id}: ${d.detail}`;
    return d.assignment_id || '';
  }
  function showAudits(list, names) {
    const c = list.counts;
    setText('audit-totals', `${c.audit_passed} passed · ${c.audit_failed} failed · ${c.audit_twin} sent to trusted `
      + `volunteers · ${c.credit_withdrawn} credit withdrawal(s)`);
    const bad = (kind) => kind === 'audit_failed' || kind === 'credit_withdrawn';
    const rows = list.events.map((e) => el('tr', {},
      el('td', { textContent: ago(e.at) }),
      el('td', { textContent: names.get(e.detail.client_id) || e.detail.client_id }),
      el('td', { className: bad(e.kind) ? 'reason' : '', textContent: auditOutcome[e.kind] || e.kind }),
      el('td', { className: 'detail', textContent: auditDetail(e) })));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 4, className: 'muted', textContent: 'none so far' })));
    $('audits').tBodies[0].replaceChildren(...rows);
  }

  // ---- an expert group: its members side by side, its samples drawn through the router ----
  // The shown task's group, experts by index then the router; null for an ordinary task.
  function groupOf(list, stats) {
    const shown = list.tasks.find((t) => stats.task && t.id === stats.task.id);
    if (!shown || shown.expert_group === null || shown.expert_group === undefined) return null;
    const members = list.tasks.filter((t) => t.expert_group === shown.expert_group)
      .sort((a, b) => (a.expert_index < 0) - (b.expert_index < 0) || a.expert_index - b.expert_index);
    return { id: shown.expert_group, members, router: members.find((t) => t.expert_index < 0) || null };
  }

  function showGroup(group, shownId) {
    $('group').hidden = !group;
    if (!group) return;
    const experts = group.members.length - (group.router ? 1 : 0);
    setText('group-title', `Expert group ${group.id}: ${experts} experts and a router`);
    const rows = group.members.map((t) => {
      const link = el('a', { href: `?task=${encodeURIComponent(t.id)}`, textContent: t.id });
      const isRouter = t.expert_index < 0;
      const accuracy = isRouter && t.validation_accuracy !== null ? `${(100 * t.validation_accuracy).toFixed(1)}%` : '–';
      return el('tr', { className: t.id === shownId ? 'shown' : '' },
        el('td', {}, link), el('td', { textContent: isRouter ? 'router' : `expert ${t.expert_index}` }),
        el('td', { className: 'num', textContent: String(t.version) }),
        el('td', { className: 'num', textContent: t.validation_loss === null ? '–' : t.validation_loss.toFixed(4) }),
        el('td', { className: 'num', textContent: accuracy }),
        el('td', { className: 'num', textContent: String(t.volunteers) }),
        el('td', { textContent: t.state }));
    });
    $('group-members').tBodies[0].replaceChildren(...rows);
  }

  let samplesTimer = null;
  async function showSamples(stats, group) {
    // A group member's page shows the group as one model: the router's gallery.
    const api = group && group.router ? `/api/v1/tasks/${encodeURIComponent(group.router.id)}` : taskApi();
    const s = await getJson(`${api}/samples`);
    const box = $('samples');
    if (s.kind === 'accuracy') {
      setText('samples-title', 'Classifier accuracy');
      const acc = stats.validation_accuracy;
      box.replaceChildren(el('div', { className: 'accuracy', textContent: acc === null ? '–' : `${(100 * acc).toFixed(1)}%` }),
        el('p', { className: 'muted', textContent: `version ${stats.evaluated_version ?? '–'}, on the ` +
          sampleText(stats.validation_samples, stats.validation_full, stats.validation_set_samples) }));
      return;
    }
    if (s.kind !== 'images') {
      setText('samples-title', 'Samples');
      box.replaceChildren(el('p', { className: 'muted', textContent: s.message || 'no samples' }));
      return;
    }
    if (s.version !== null && s.version !== dashboard.samplesVersion) {
      dashboard.samplesVersion = s.version;
      const img = el('img', { id: 'samples-img', alt: `images generated by model version ${s.version}, a row per class` });
      const labels = el('div', { className: 'rows' }, ...s.classes.map((name) => el('span', { textContent: name })));
      labels.style.gridTemplateRows = `repeat(${Math.max(s.classes.length, 1)}, 1fr)`;
      img.src = s.url;
      box.replaceChildren(labels, img);
    } else if (s.version === null) {
      box.replaceChildren(el('p', { className: 'muted', textContent: s.error || 'drawing the first samples…' }));
    }
    const drawing = s.rendering || (s.version !== null && s.version < s.current_version && !s.error);
    const source = s.routing ? `Samples of group ${group ? group.id : ''} through the router (${s.routing}), router version`
      : 'Samples from version';
    setText('samples-title', `${source} ${s.version ?? '–'}` + (drawing ? ` (drawing version ${s.current_version}…)` : ''));
    clearTimeout(samplesTimer);
    if (drawing) samplesTimer = setTimeout(() => showSamples(stats, group).catch(offline), 2000);
  }

  // ---- prompts: a text task draws a row of samples for a typed prompt or a listed caption ----
  const prompts = { task: undefined, caption: null, run: 0, drawn: 0, version: 0, url: null };
  dashboard.prompts = prompts;
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  function promptStatus(text, error = false) {
    setText('prompt-status', text);
    $('prompt-status').classList.toggle('error', error);
  }
  // Loaded once for each task shown: the form appears only where the task can draw prompts.
  async function showPrompts(stats) {
    prompts.version = stats.version;
    const task = stats.task ? stats.task.id : null;
    if (prompts.task === task) return;
    prompts.task = task;
    prompts.caption = null;
    const p = task ? await getJson(`${taskApi()}/prompts`) : { available: false };
    $('prompt-form').hidden = !p.available;
    if (!p.available) return;
    setText('prompt-help', `${p.message}. ${p.samples} samples from the EMA weights; CFG is the guidance scale.`);
    const text = $('prompt-text');
    text.value = '';
    text.readOnly = !p.typed;
    text.placeholder = p.typed ? `e.g. ${p.captions.length ? p.captions[0].text : 'a prompt'}` : 'pick a caption';
    setText('prompt-words', p.typed ? `words: ${p.vocabulary.join(' ')}` : '');
    const groups = ['validation', 'heldout'].map((split) => el('optgroup',
      { label: split === 'heldout' ? 'held-out combinations' : 'validation captions' },
      ...p.captions.filter((c) => c.split === split).map((c) => el('option', { value: String(c.index), textContent: c.text }))));
    $('prompt-caption').replaceChildren(el('option', { value: '', textContent: p.typed ? 'or pick a caption…' : 'pick a caption…' }),
      ...groups.filter((g) => g.children.length));
    const cfg = $('prompt-cfg');
    cfg.min = String(p.guidance.min);
    cfg.max = String(Math.min(p.guidance.max, 7));
    cfg.value = String(p.guidance.default);
    setText('prompt-cfg-value', cfg.value);
  }
  $('prompt-cfg').addEventListener('input', (event) => setText('prompt-cfg-value', event.target.value));
  $('prompt-caption').addEventListener('change', (event) => {
    const chosen = event.target.selectedOptions[0];
    prompts.caption = event.target.value === '' ? null : Number(event.target.value);
    if (prompts.caption !== null) $('prompt-text').value = chosen.textContent;
  });
  $('prompt-text').addEventListener('input', () => {
    prompts.caption = null;
    $('prompt-caption').value = '';
  });
  $('prompt-form').addEventListener('submit', (event) => {
    event.preventDefault();
    drawPrompt().catch((error) => promptStatus(String(error), true));
  });

  // Asks until the row is drawn (202 while it is drawn or waits its turn), pinned to the
  // version shown when asked; a newer request abandons an older one.
  async function drawPrompt() {
    const run = ++prompts.run;
    const params = new URLSearchParams();
    const text = $('prompt-text').value.trim();
    if (prompts.caption !== null) params.set('caption', String(prompts.caption));
    else if (text) params.set('prompt', text);
    else { promptStatus('type a prompt or pick a caption', true); return; }
    const cfg = $('prompt-cfg').value, seed = $('prompt-seed').value || '0';
    params.set('cfg', cfg);
    params.set('seed', seed);
    params.set('version', String(prompts.version));
    const path = `${taskApi()}/prompt.png?${params}`;
    const until = Date.now() + 180_000;
    promptStatus('drawing…');
    while (run === prompts.run) {
      const response = await fetch(path, { cache: 'no-store' });
      if (run !== prompts.run) return;
      if (response.status === 200) {
        if (prompts.url) URL.revokeObjectURL(prompts.url);
        prompts.url = URL.createObjectURL(await response.blob());
        const img = $('prompt-img');
        img.src = prompts.url;
        img.alt = `${$('prompt-text').value}: samples at CFG ${cfg}, seed ${seed}`;
        img.hidden = false;
        promptStatus(`“${$('prompt-text').value}” · CFG ${cfg} · seed ${seed} · version ${response.headers.get('X-Tessera-Version')}`);
        prompts.drawn += 1;
        return;
      }
      const body = await response.json().catch(() => ({}));
      if (response.status !== 202) { promptStatus(body.message || `HTTP ${response.status}`, true); return; }
      if (Date.now() > until) { promptStatus('the server did not draw it in time; try again', true); return; }
      promptStatus(body.state === 'drawing' ? `drawing from version ${body.version}…` : 'waiting for the sampler…');
      await sleep(1000 * Math.min(body.retry_after_s || 1, 5));
    }
  }

  // The task selector: every task, the one shown selected; choosing one opens its page.
  function showTasks(list, stats) {
    const shown = stats.task ? stats.task.id : null;
    const options = list.tasks.map((t) => el('option', { value: t.id, textContent: `${t.id} (${t.state})`,
      selected: t.id === shown }));
    if (!options.length) options.push(el('option', { value: '', textContent: 'none yet' }));
    $('task-select').replaceChildren(...options);
  }
  $('task-select').addEventListener('change', (event) => {
    dashboard.taskId = event.target.value || null;
    history.replaceState(null, '', dashboard.taskId ? `?task=${encodeURIComponent(dashboard.taskId)}` : '/');
    dashboard.samplesVersion = null;
    refresh();
  });

  // ---- refreshing ----
  function offline(error) {
    $('live').classList.remove('on');
    setText('live', 'server unreachable, retrying…');
    console.warn(error);
  }

  let refreshing = false, again = false;
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      const api = taskApi();
      const [tasks, stats, versions, minutes, hours, volunteers, rejections, audits] = await Promise.all([
        getJson('/api/v1/tasks'), getJson(`${api}/stats`), getJson(`${api}/versions`),
        getJson(`${api}/history?bucket=60&buckets=120`), getJson(`${api}/history?bucket=3600&buckets=48`),
        getJson('/api/v1/volunteers'), getJson('/api/v1/rejections?limit=15'), getJson('/api/v1/audits?limit=15')]);
      showTasks(tasks, stats);
      showStats(stats);
      showCharts(versions, minutes, hours);
      const names = showVolunteers(volunteers);
      showRejections(rejections, names);
      showAudits(audits, names);
      const group = groupOf(tasks, stats);
      showGroup(group, stats.task ? stats.task.id : null);
      await showSamples(stats, group);
      await showPrompts(stats);
      dashboard.refreshes += 1;
    } catch (error) {
      offline(error);
    } finally {
      refreshing = false;
      if (again) { again = false; setTimeout(refresh, 250); }
    }
  }

  // Events arrive in bursts (a merge, an evaluation, a verdict): refresh at most once a second.
  let pending = null;
  function soon() {
    if (!pending) pending = setTimeout(() => { pending = null; refresh(); }, 1000);
  }

  const eventKinds = ['version_merged', 'evaluated', 'result_received', 'result_accepted', 'result_rejected',
    'work_issued', 'work_timed_out', 'work_abandoned', 'work_unit_retired', 'client_registered', 'client_banned',
    'client_unbanned', 'client_quarantined', 'client_released', 'task_created', 'task_state', 'check_suspended',
    'check_restored', 'quarantine_fallback', 'divergence_recovered', 'divergence_paused', 'credit_withdrawn',
    'audit_passed', 'audit_failed', 'audit_twin'];
  function listen() {
    const stream = new EventSource(`/api/v1/events/stream?after=${dashboard.lastEventId}`);
    stream.onopen = () => { $('live').classList.add('on'); setText('live', 'live'); };
    stream.onerror = () => { $('live').classList.remove('on'); setText('live', 'reconnecting…'); };
    for (const kind of eventKinds)
      stream.addEventListener(kind, (message) => {
        const event = JSON.parse(message.data);
        dashboard.lastEventId = Math.max(dashboard.lastEventId, event.id);
        if (kind === 'version_merged' && event.detail.task_id === dashboard.shownTask) showVersion(event.detail.version);
        soon();
      });
  }

  refresh().then(listen);
  // The uptime ticks between events without asking the server.
  setInterval(() => { if (dashboard.startedAt) setText('uptime', duration(nowServer() - dashboard.startedAt)); }, 5000);
})();
