// pairbot's status pages: refresh the element marked data-live with the fragment it names,
// every data-live-every seconds, so a card's page follows its steps without a reload.
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
  async function refresh() {
    try {
      const answer = await fetch(live.dataset.live, { headers: { Accept: "text/html" } });
      if (answer.ok) {
        const html = await answer.text();
        if (html !== live.dataset.shown) {
          live.dataset.shown = html;
          live.innerHTML = html;
          followOutput();
        }
      }
    } catch (err) {
      // The server restarting is not an error worth the console: try again next time.
    }
    setTimeout(refresh, every);
  }
  followOutput();
  setTimeout(refresh, every);
})();
