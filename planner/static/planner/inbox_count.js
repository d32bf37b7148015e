// The header's inbox count, kept live: the server sends it as Server-Sent Events (GET /inbox/stream/,
// "event: count") each time it changes; a stream cut off is opened again by the browser. The page
// also reads GET /api/v1/inbox/?count_only=1 when the window gets the focus back (a dismissal in
// another tab), and only where EventSource is missing or the stream is refused does it poll that
// every 30 s while it is shown. The number is the link's text; a polite live region says it in
// words when it changes ("3 waiting in your inbox").
(function () {
  "use strict";
  var PERIOD_MS = 30000;

  function start() {
    var link = document.querySelector("a.inbox-link[data-count-url]");
    var badge = link && link.querySelector("[data-inbox-count]");
    var live = document.querySelector("[data-inbox-live]");
    if (!link || !badge) return;
    var url = link.getAttribute("data-count-url");
    var streamUrl = link.getAttribute("data-stream-url");
    var shown = badge.textContent.trim();
    var stopped = false;
    var busy = false;
    var polling = false;

    function show(count) {
      var text = String(count);
      badge.hidden = count === 0;
      if (text === shown) return;
      shown = text;
      badge.textContent = text;
      if (live) live.textContent = count + " waiting in your inbox";
    }

    function refresh() {
      if (stopped || busy || document.visibilityState === "hidden") return;
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401 || response.status === 403) {
            stopped = true; // signed out elsewhere: nothing more to count
            return null;
          }
          return response.ok ? response.json() : null;
        })
        .then(function (body) {
          if (body && typeof body.count === "number") show(body.count);
        })
        .catch(function () {}) // offline for a moment: the next poll tries again
        .then(function () {
          busy = false;
        });
    }

    function poll() {
      if (polling) return;
      polling = true;
      refresh();
      window.setInterval(refresh, PERIOD_MS);
    }

    window.addEventListener("focus", refresh);
    document.addEventListener("visibilitychange", refresh);
    if (!streamUrl || typeof window.EventSource !== "function") {
      poll();
      return;
    }
    var source = new window.EventSource(streamUrl);
    source.addEventListener("count", function (event) {
      var count = parseInt(event.data, 10);
      if (!isNaN(count) && count >= 0) show(count);
    });
    source.addEventListener("error", function () {
      // A cut stream is opened again by the browser (CONNECTING); a refused one is CLOSED for good.
      if (source.readyState === window.EventSource.CLOSED) poll();
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
