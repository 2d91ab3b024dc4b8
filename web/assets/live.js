// Live updates: the server pushes the rendered content over Server-Sent
// Events whenever the projection changes; the page swaps it in.
(function () {
  var conn = document.getElementById("conn");
  var content = document.getElementById("content");
  // The page's query (?window=) chooses the coverage bars' time axis.
  var es = new EventSource("/live" + window.location.search);
  es.addEventListener("update", function (ev) {
    content.innerHTML = ev.data;
    conn.textContent = "live · seq " + ev.lastEventId;
    conn.className = "conn live";
  });
  es.onerror = function () { conn.textContent = "reconnecting…"; conn.className = "conn"; };
})();
