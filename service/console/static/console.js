// tailtune console: draws the plotly figures a page carries (JSON in <script type="application/json">), and the
// trace upload's drag and drop with its progress bar. Everything works without this script, less comfortably: the
// upload form posts as a plain form, the pages just do not draw figures or update by themselves.
"use strict";

function drawPlots(root) {
  if (typeof Plotly === "undefined") return;
  root.querySelectorAll("[data-plot]").forEach(function (el) {
    if (el.dataset.drawn) return;
    var source = document.getElementById(el.dataset.plot);
    if (!source) return;
    var spec = JSON.parse(source.textContent);
    var config = Object.assign({ displaylogo: false }, spec.config || {});
    if (window.matchMedia("(max-width: 640px)").matches) {
      config.displayModeBar = false;  // a phone: no room beside the title; drag zooms, double-tap resets
    }
    el.dataset.drawn = "1";
    Plotly.newPlot(el, spec.data, spec.layout, config);
  });
}

// The figures follow the window's width: redrawn a moment after it stops changing, each one that has a size.
var resizing = null;
function resizePlots() {
  if (typeof Plotly === "undefined") return;
  document.querySelectorAll("[data-plot][data-drawn]").forEach(function (el) {
    if (el.offsetWidth > 0 && el.offsetParent !== null) {
      try { Plotly.Plots.resize(el); } catch (err) { /* drawn again on the next resize */ }
    }
  });
}
window.addEventListener("resize", function () {
  clearTimeout(resizing);
  resizing = setTimeout(resizePlots, 150);
});

function scrollLogs(root) {
  root.querySelectorAll("#job-log").forEach(function (pre) { pre.scrollTop = pre.scrollHeight; });
}

function setupUpload() {
  var form = document.getElementById("upload-form");
  if (!form) return;
  var zone = document.getElementById("drop-zone");
  var input = document.getElementById("upload-file");
  var bar = document.getElementById("upload-progress");
  var status = document.getElementById("upload-status");
  var button = document.getElementById("upload-submit");

  ["dragenter", "dragover"].forEach(function (name) {
    zone.addEventListener(name, function (e) { e.preventDefault(); zone.classList.add("over"); });
  });
  ["dragleave", "drop"].forEach(function (name) {
    zone.addEventListener(name, function (e) { e.preventDefault(); zone.classList.remove("over"); });
  });
  zone.addEventListener("drop", function (e) {
    if (e.dataTransfer && e.dataTransfer.files.length) {
      input.files = e.dataTransfer.files;
      status.textContent = "Ready to upload " + input.files[0].name + ".";
    }
  });

  form.addEventListener("submit", function (e) {
    if (!input.files.length) return;
    e.preventDefault();
    var data = new FormData(form);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.setRequestHeader("X-CSRF-Token", form.dataset.csrf);
    xhr.setRequestHeader("X-Requested-With", "console");
    bar.hidden = false;
    bar.value = 0;
    button.disabled = true;
    status.textContent = "Uploading " + input.files[0].name + " …";
    xhr.upload.addEventListener("progress", function (ev) {
      if (ev.lengthComputable) {
        bar.value = Math.round(100 * ev.loaded / ev.total);
        status.textContent = "Uploading " + input.files[0].name + ": " + bar.value + " %";
      }
    });
    xhr.addEventListener("load", function () {
      button.disabled = false;
      var body = {};
      try { body = JSON.parse(xhr.responseText); } catch (err) { body = {}; }
      if (xhr.status >= 200 && xhr.status < 300) {
        bar.value = 100;
        status.textContent = (body.message || "Uploaded.") + " Ingest status below.";
        form.reset();
        var list = document.getElementById("trace-list");
        if (list && window.htmx) {
          htmx.ajax("GET", list.dataset.src, { target: "#trace-list", swap: "outerHTML" });
        }
      } else {
        bar.hidden = true;
        status.textContent = "Upload refused (" + xhr.status + "): " + (body.detail || xhr.statusText);
      }
    });
    xhr.addEventListener("error", function () {
      button.disabled = false;
      bar.hidden = true;
      status.textContent = "Upload failed: the connection broke.";
    });
    xhr.send(data);
  });
}

document.addEventListener("DOMContentLoaded", function () {
  drawPlots(document);
  scrollLogs(document);
  setupUpload();
  document.querySelectorAll("a[data-back]").forEach(function (a) {
    a.addEventListener("click", function (e) {
      if (history.length > 1) { e.preventDefault(); history.back(); }
    });
  });
  document.body.addEventListener("htmx:afterSwap", function (e) {
    drawPlots(e.target);
    scrollLogs(e.target);
  });
});
