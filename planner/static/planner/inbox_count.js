// The header's inbox count, kept live: GET /api/v1/inbox/?count_only=1 every 30 s while the page
// is shown, and at once when the window gets the focus back. The number is the link's text; a
// polite live region says it in words when it changes ("3 waiting in your inbox").
(function () {
  "use strict";
  var PERIOD_MS = 30000;

  function start() {
    var link = document.querySelector("a.inbox-link[data-count-url]");
    var badge = link && link.querySelector("[data-inbox-count]");
    var live = document.querySelector("[data-inbox-live]");
    if (!link || !badge) return;
    var url = link.getAttribute("data-count-url");
    var shown = badge.textContent.trim();
    var stopped = false;
    var busy = false;

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

    window.setInterval(refresh, PERIOD_MS);
    window.addEventListener("focus", refresh);
    document.addEventListener("visibilitychange", refresh);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
