// The page's first script, before the app's module: when the network
// drops a file of the app on the way (Chromium cancels requests in
// flight when this machine's network changes, ERR_NETWORK_CHANGED: a
// laptop joining another Wi-Fi, a program adding an interface), the
// module fails whole and the page would stay empty. A failed module stays
// failed in its page, so the page loads again, token and all: three
// times at most, a second apart, and then it says what happened.
(function () {
  var key = "cove.bootReloads";
  var failed = false;
  window.addEventListener("error", function (e) {
    var s = e.target;
    if (!(s instanceof HTMLScriptElement) || s.type !== "module") return;
    failed = true;
    var n = Number(sessionStorage.getItem(key) || 0);
    if (n < 3) {
      sessionStorage.setItem(key, String(n + 1));
      setTimeout(function () { location.reload(); }, 1000);
      return;
    }
    sessionStorage.removeItem(key);
    var st = document.getElementById("status"); // above the scripts: parsed by now
    if (st) st.textContent = "cove: the page could not load its code (" + s.src + "): is the workspace's launcher running? Reload the page.";
  }, true);
  window.addEventListener("load", function () {
    if (!failed) sessionStorage.removeItem(key);
  });
})();
