/* Draws the page's charts with the vendored ECharts from the JSON in <script id="charts-data">
   (shapes: gate/charts.py). Each chart goes into the element with id "chart-<id>"; once drawn, the
   element carries data-points (the number of values drawn), which the browser tests read. */
(function () {
  "use strict";
  var PALETTE = ["#3b6fd4", "#9aa5b8", "#d98b2b", "#4c9a6a"];

  function whiskers(seriesIndex, count, low, high, color) {
    // An interval per bar, centred on the bar of this series within its category.
    return {
      type: "custom",
      silent: true,
      z: 10,
      data: low.map(function (l, i) { return [i, l, high[i]]; }),
      renderItem: function (params, api) {
        if (api.value(1) === null || isNaN(api.value(1))) return null;
        var band = api.size([1, 0])[0];
        var width = (band * 0.7) / count;
        var x = api.coord([api.value(0), 0])[0] - band * 0.35 + width * (seriesIndex + 0.5);
        var top = api.coord([api.value(0), api.value(2)])[1];
        var bottom = api.coord([api.value(0), api.value(1)])[1];
        var style = { stroke: "#1d2330", lineWidth: 1.2 };
        return {
          type: "group",
          children: [
            { type: "line", shape: { x1: x, y1: top, x2: x, y2: bottom }, style: style },
            { type: "line", shape: { x1: x - 4, y1: top, x2: x + 4, y2: top }, style: style },
            { type: "line", shape: { x1: x - 4, y1: bottom, x2: x + 4, y2: bottom }, style: style }
          ]
        };
      },
      encode: { x: 0, y: [1, 2] },
      itemStyle: { color: color }
    };
  }

  function thresholdLine(chart) {
    if (chart.threshold === null || chart.threshold === undefined) return undefined;
    return {
      silent: true,
      symbol: "none",
      lineStyle: { color: "#c0392b", type: "dashed" },
      label: { formatter: chart.threshold_label || String(chart.threshold), position: "insideEndTop" },
      data: [{ yAxis: chart.threshold }]
    };
  }

  function barsOption(chart) {
    var count = chart.bars.length;
    var series = [];
    chart.bars.forEach(function (s, i) {
      series.push({
        name: s.name,
        type: "bar",
        barWidth: (70 / count) + "%",
        barGap: "0%",
        data: s.values,
        itemStyle: { color: PALETTE[i % PALETTE.length] },
        markLine: i === 0 ? thresholdLine(chart) : undefined
      });
    });
    chart.bars.forEach(function (s, i) {
      series.push(whiskers(i, count, s.low, s.high, PALETTE[i % PALETTE.length]));
    });
    return {
      title: { text: chart.title, left: 0, top: 0, textStyle: { fontSize: 14 } },
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      legend: { top: 24, right: 0, data: chart.bars.map(function (s) { return s.name; }) },
      grid: { left: 48, right: 16, top: 72, bottom: 56 },
      xAxis: { type: "category", data: chart.categories, axisLabel: { interval: 0, rotate: chart.categories.length > 5 ? 25 : 0 } },
      yAxis: { type: "value", name: chart.y_name, min: chart.rate_axis ? 0 : undefined, max: chart.rate_axis ? 1 : undefined },
      series: series
    };
  }

  function linesOption(chart) {
    var series = [];
    chart.lines.forEach(function (s, i) {
      var color = PALETTE[i % PALETTE.length];
      var stack = "band-" + i;
      if (s.low.length) {
        // The interval as a band: a transparent base at the low end, the width stacked on it.
        series.push({
          type: "line", stack: stack, symbol: "none", silent: true, lineStyle: { opacity: 0 },
          data: s.points.map(function (p, k) { return [p[0], s.low[k]]; })
        });
        series.push({
          type: "line", stack: stack, symbol: "none", silent: true, lineStyle: { opacity: 0 },
          areaStyle: { color: color, opacity: 0.18 },
          data: s.points.map(function (p, k) {
            return [p[0], s.high[k] === null || s.low[k] === null ? null : s.high[k] - s.low[k]];
          })
        });
      }
      series.push({
        name: s.name, type: "line", step: s.step ? "end" : false, showSymbol: s.points.length < 40,
        data: s.points, itemStyle: { color: color }, lineStyle: { color: color, width: 2 },
        markLine: i === 0 ? thresholdLine(chart) : undefined
      });
    });
    return {
      title: { text: chart.title, left: 0, top: 0, textStyle: { fontSize: 14 } },
      tooltip: { trigger: "axis" },
      legend: { top: 24, right: 0, data: chart.lines.map(function (s) { return s.name; }) },
      grid: { left: 56, right: 16, top: 72, bottom: 40 },
      xAxis: { type: "time" },
      // Zero stays on the axis (ECharts' scale: false): a zoomed axis makes a 0.006 h difference look
      // dramatic. Differences and ratios read against 0 and 1, and their bar is drawn as a line.
      yAxis: { type: "value", name: chart.y_name, min: chart.rate_axis ? 0 : undefined, scale: false },
      series: series
    };
  }

  function points(chart) {
    if (chart.kind === "bars") {
      return chart.bars.reduce(function (n, s) { return n + s.values.filter(function (v) { return v !== null; }).length; }, 0);
    }
    return chart.lines.reduce(function (n, s) { return n + s.points.filter(function (p) { return p[1] !== null; }).length; }, 0);
  }

  var drawn = {};

  function draw(charts) {
    var locale = (document.documentElement.lang || "en").toLowerCase().indexOf("zh") === 0 ? "ZH" : "EN";
    charts.forEach(function (chart) {
      var el = document.getElementById("chart-" + chart.id);
      if (!el) return;
      var instance = drawn[chart.id] || echarts.init(el, null, { renderer: "svg", locale: locale });
      drawn[chart.id] = instance;
      instance.setOption(chart.kind === "bars" ? barsOption(chart) : linesOption(chart), true);
      el.dataset.points = String(points(chart));
    });
  }

  window.evalhubCharts = { draw: draw };
  var data = document.getElementById("charts-data");
  if (data) draw(JSON.parse(data.textContent));
  window.addEventListener("resize", function () {
    Object.keys(drawn).forEach(function (id) { drawn[id].resize(); });
  });
})();
