/* Live figures without reloading. The element with id "live" names what to poll and how often
   (data-live-seconds, default 3) and which updater reads the answer: "gate_run" polls the run's
   JSON API (data-live-url) for progress per layer, elapsed, ETA and where the run is (the worker
   running it, or why a queued run waits: behind other runs, or no live worker on its queue), and
   reloads once when the run finishes, to show its results; "page" fetches the page itself and
   swaps in its [data-live-swap] parts and chart data (the canary dashboard). */
(function () {
  "use strict";
  var root = document.getElementById("live");
  if (!root) return;
  var url = root.dataset.liveUrl;
  var seconds = Number(root.dataset.liveSeconds || 3);

  function text(id, value) {
    var el = document.getElementById(id);
    if (el) el.textContent = value;
  }

  function duration(s) {
    if (s === null || s === undefined) return "–";
    s = Math.round(s);
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + " h " : "") + (h || m ? m + " min " : "") + r + " s";
  }

  var updaters = {
    gate_run: function (run) {
      var live = run.live;
      // The run's status in the page's language (the labels ride on the element), else its code.
      text("live-status", root.dataset["status" + live.status.charAt(0).toUpperCase() + live.status.slice(1)] || live.status);
      text("live-progress", live.progress + " %");
      text("live-elapsed", duration(live.elapsed_seconds));
      text("live-eta", duration(live.eta_seconds));
      text("live-waiting", live.waiting_reason || "");
      var bar = document.getElementById("live-bar");
      if (bar) bar.value = live.progress;
      live.layers.forEach(function (layer) {
        var row = document.getElementById("live-layer-" + layer.layer);
        if (!row) return;
        row.dataset.state = layer.state;
        var meter = row.querySelector("progress");
        if (meter && layer.total) { meter.max = layer.total; meter.value = layer.done; }
        var count = row.querySelector(".live-count");
        if (count) count.textContent = layer.total ? layer.done + " / " + layer.total : "";
        var state = row.querySelector(".live-state");
        if (state) state.textContent = root.dataset["state" + layer.state.charAt(0).toUpperCase() + layer.state.slice(1)] || layer.state;
      });
      root.dataset.updates = String(Number(root.dataset.updates || 0) + 1);
      return !live.finished;
    },
    page: function (html) {
      // The page anew: swap in its [data-live-swap] parts and redraw the charts from its data.
      var fresh = new DOMParser().parseFromString(html, "text/html");
      document.querySelectorAll("[data-live-swap]").forEach(function (el) {
        var next = el.id && fresh.getElementById(el.id);
        if (next) el.innerHTML = next.innerHTML;
      });
      var data = fresh.getElementById("charts-data");
      if (data && window.evalhubCharts) window.evalhubCharts.draw(JSON.parse(data.textContent));
      root.dataset.updates = String(Number(root.dataset.updates || 0) + 1);
      return true;
    }
  };

  function poll() {
    var json = root.dataset.liveKind !== "page";
    fetch(url || window.location.href, { credentials: "same-origin", headers: { Accept: json ? "application/json" : "text/html" } })
      .then(function (response) {
        if (!response.ok) return Promise.reject(response.status);
        return json ? response.json() : response.text();
      })
      .then(function (body) {
        var again = updaters[root.dataset.liveKind](body);
        if (again) setTimeout(poll, seconds * 1000);
        else if (root.dataset.reloadWhenDone) window.location.reload();
      })
      .catch(function () { setTimeout(poll, seconds * 4000); });
  }

  window.evalhubLive = { updaters: updaters };
  if (root.dataset.liveActive) setTimeout(poll, seconds * 1000);
})();
