// toolscope console: the little that is not htmx. No inline scripts (the
// Content-Security-Policy forbids them).
(function () {
  "use strict";
  var offline = function (down) {
    var b = document.getElementById("offline");
    if (b) { b.hidden = !down; }
  };
  document.addEventListener("htmx:sendError", function () { offline(true); });
  document.addEventListener("htmx:sseError", function () { offline(true); });
  document.addEventListener("htmx:sseOpen", function () { offline(false); });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail && e.detail.xhr && e.detail.xhr.status > 0) { offline(false); }
  });
  // A form with data-confirm is sent only once the person confirms it.
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f && f.hasAttribute && f.hasAttribute("data-confirm") && !window.confirm(f.getAttribute("data-confirm"))) {
      e.preventDefault();
    }
  });
  document.addEventListener("click", function (e) {
    var t = e.target.closest("[data-copy]");
    if (!t) { return; }
    var src = document.getElementById(t.getAttribute("data-copy"));
    if (src && navigator.clipboard) {
      navigator.clipboard.writeText(src.textContent).then(function () { t.textContent = "Copied"; });
    }
  });
})();
