// ARVIS console: the few lines of script the pages use. Everything reads without it.
// 1. A region with data-refresh is re-fetched every data-interval ms while the page is
//    open and visible, unless the person is using it (focus inside, a <details> open).
// 2. A button with data-copy copies the value of the input it names.
"use strict";
(function () {
  function busy(region) {
    var active = document.activeElement;
    if (active && active !== document.body && region.contains(active)) return true;
    return region.querySelector("details[open]") !== null;
  }
  function poll(region) {
    var url = region.getAttribute("data-refresh");
    var every = parseInt(region.getAttribute("data-interval") || "3000", 10);
    function tick() {
      if (document.hidden || busy(region)) { setTimeout(tick, every); return; }
      fetch(url, { credentials: "same-origin", redirect: "follow", cache: "no-store" })
        .then(function (response) {
          // Signed out or the session ended: leave the page as it is, stop asking.
          if (!response.ok || response.redirected) return null;
          return response.text();
        })
        .then(function (html) {
          if (html === null) return;
          if (!busy(region)) region.innerHTML = html;
          setTimeout(tick, every);
        })
        .catch(function () { setTimeout(tick, every * 2); });
    }
    setTimeout(tick, every);
  }
  function copy(button) {
    button.addEventListener("click", function () {
      var input = document.getElementById(button.getAttribute("data-copy"));
      if (!input) return;
      input.select();
      var done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard) navigator.clipboard.writeText(input.value).then(done, function () {});
      else { document.execCommand("copy"); done(); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh]").forEach(poll);
    document.querySelectorAll("[data-copy]").forEach(copy);
  });
})();
