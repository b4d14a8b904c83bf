// pairbot's status pages: keep the element marked data-live up to date, so a card's page
// follows its steps without a reload. The server streams the part's HTML as server-sent
// events (data-live-stream); where that cannot be had (no EventSource, or the server is at
// its limit of streams) the script asks for the fragment (data-live) every data-live-every s.
"use strict";
(function () {
  const live = document.querySelector("[data-live]");
  if (!live) { return; }
  const every = Math.max(1, Number(live.dataset.liveEvery) || 2) * 1000;
  // A running step's output is a tail: keep its newest lines in view after each swap.
  function followOutput() {
    for (const pre of live.querySelectorAll("pre.live-output")) {
      pre.scrollTop = pre.scrollHeight;
    }
  }
  function show(html) {
    if (html !== live.dataset.shown) {
      live.dataset.shown = html;
      live.innerHTML = html;
      followOutput();
    }
  }
  async function refresh() {
    try {
      const answer = await fetch(live.dataset.live, { headers: { Accept: "text/html" } });
      if (answer.ok) {
        show(await answer.text());
      }
    } catch (err) {
      // The server restarting is not an error worth the console: try again next time.
    }
    setTimeout(refresh, every);
  }
  function stream() {
    const source = new EventSource(live.dataset.liveStream);
    source.addEventListener("fragment", (event) => show(event.data));
    source.addEventListener("gone", () => source.close());
    source.addEventListener("error", () => {
      // A dropped stream reconnects by itself; a refused one (closed) falls back to polling.
      if (source.readyState === EventSource.CLOSED) {
        setTimeout(refresh, every);
      }
    });
  }
  followOutput();
  if (live.dataset.liveStream && "EventSource" in window) {
    stream();
  } else {
    setTimeout(refresh, every);
  }
})();
