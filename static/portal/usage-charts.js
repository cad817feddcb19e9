// The job page's "Resources": one small uPlot chart per task and figure (CPU; memory with the
// task's memoryMB as a line; GPU utilisation and GPU memory for a task with GPUs), fed by
// GET /api/v2/jobs/<user~job>/usage (jobs.usage). ``window.refreshUsage`` reads it again: the
// page calls it on its 5 s tick while tasks run and when news of the job comes.
(function () {
  const section = document.getElementById("resources");
  if (!section || !window.uPlot) return;
  const holder = document.getElementById("usage-charts");
  const warned = document.getElementById("usage-warnings");
  const charts = {};  // "<role>-<index>/<figure>" -> {plot, box}
  window.usageCharts = charts;
  window.usageRefreshes = 0;
  const FIGURES = [
    {key: "cpu", title: "CPU (cores)", column: 1, gpu: false},
    {key: "memory", title: "Memory (MB)", column: 2, gpu: false, limit: true},
    {key: "gpu-util", title: "GPU utilisation (%)", column: 3, gpu: true},
    {key: "gpu-memory", title: "GPU memory (MB)", column: 4, gpu: true},
  ];

  function data(task, figure) {
    const xs = task.points.map(function (p) { return p[0] / 1000; });
    const ys = task.points.map(function (p) { return p[figure.column]; });
    if (!figure.limit) return [xs, ys];
    return [xs, ys, xs.map(function () { return task.memoryMB; })];
  }

  // A single sample (a task that ran a few seconds) is given a minute around it: uPlot's own
  // range for one point of a time scale in seconds is 86,400,000 of them (its autoScaleX).
  function timeRange(u, min, max) {
    const xs = u.data[0];
    return xs.length === 1 ? [xs[0] - 30, xs[0] + 30] : [min, max];
  }

  function options(figure, width) {
    const series = [{}, {label: figure.title, stroke: "#1f6feb", width: 1.5, fill: "rgba(31,111,235,0.08)"}];
    if (figure.limit) series.push({label: "memoryMB", stroke: "#d1242f", width: 1, dash: [6, 4], points: {show: false}});
    return {
      width: width, height: 140, series: series, legend: {show: true},
      scales: {x: {time: true, range: timeRange}, y: {range: function (u, min, max) { return [0, Math.max(max || 0, figure.key === "gpu-util" ? 100 : 0.001) * 1.05]; }}},
      axes: [{}, {size: 48}],
    };
  }

  function taskBox(label) {
    let box = document.getElementById("usage-" + label);
    if (box) return box;
    box = document.createElement("div");
    box.className = "usage-task";
    box.id = "usage-" + label;
    const title = document.createElement("h3");
    title.textContent = label;
    box.appendChild(title);
    const row = document.createElement("div");
    row.className = "usage-row";
    box.appendChild(row);
    holder.appendChild(box);
    return box;
  }

  function render(body) {
    window.usageRefreshes += 1;
    const empty = document.getElementById("usage-empty");
    if (empty) empty.hidden = body.tasks.some(function (t) { return t.points.length; });
    warned.replaceChildren.apply(warned, body.tasks.flatMap(function (task) {
      return task.warnings.map(function (w) {
        const p = document.createElement("p");
        p.className = "note warning usage-warning";
        p.dataset.kind = w.kind;
        p.textContent = w.message;
        return p;
      });
    }));
    body.tasks.forEach(function (task) {
      if (!task.points.length) return;
      const label = task.taskRole + "-" + task.taskIndex;
      const row = taskBox(label).querySelector(".usage-row");
      FIGURES.forEach(function (figure) {
        if (figure.gpu && !task.gpu) return;
        const key = label + "/" + figure.key;
        const values = data(task, figure);
        let chart = charts[key];
        if (!chart) {
          const box = document.createElement("div");
          box.className = "usage-chart";
          box.id = "usage-" + label + "-" + figure.key;
          row.appendChild(box);
          chart = charts[key] = {box: box, plot: new uPlot(options(figure, 300), values, box)};
        } else {
          chart.plot.setData(values);
        }
        chart.box.dataset.points = String(values[0].length);
      });
    });
  }

  let asking = false;
  window.refreshUsage = function () {
    if (asking) return;
    asking = true;
    fetch(section.dataset.url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) { if (body) render(body); })
      .catch(function () {})
      .finally(function () { asking = false; });
  };
  window.refreshUsage();
})();
