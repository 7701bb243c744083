// The live feed: findings stored after the page was served arrive by Server-Sent Events and
// are put at the top. The stream's URL carries the page's cursor and filters; EventSource
// resumes after the last event it got (Last-Event-ID) when the connection drops.
(function () {
  "use strict";
  const list = document.getElementById("feed");
  if (!list || !window.EventSource) {
    return;
  }
  const status = document.getElementById("live");
  const template = document.getElementById("item-template");
  const base = document.body.dataset.base || "";

  function text(li, selector, value) {
    li.querySelector(selector).textContent = value === null || value === undefined ? "" : value;
  }

  function add(f, cursor) {
    if (list.querySelector('[data-cursor="' + cursor + '"]')) {
      return;  // already on the page
    }
    const li = template.content.firstElementChild.cloneNode(true);
    li.dataset.cursor = cursor;
    li.dataset.fingerprint = f.fingerprint;
    li.classList.add("item-" + f.severity, "new");
    text(li, ".time", f.ts.slice(5, 10) + " " + f.ts.slice(11, 19));
    li.querySelector(".time").title = f.ts;
    text(li, ".sev", f.severity);
    li.querySelector(".sev").classList.add("sev-" + f.severity);
    text(li, ".table", f.table || f.pit || "");
    text(li, ".message", f.message);
    const code = li.querySelector(".code");
    code.textContent = f.code;
    code.href = base + "/finding/" + encodeURIComponent(f.id);
    const round = li.querySelector(".round-link");
    if (f.table && f.shoe !== null && f.round !== null) {
      round.href = base + "/round?" + new URLSearchParams({table: f.table, shoe: f.shoe, round: String(f.round)});
    } else {
      round.remove();
    }
    // A reader scrolled into the list keeps the rows on screen where they were: the page
    // is scrolled by what the new row added above them (done here, not left to the
    // browser's scroll anchoring, which not every tablet's browser has).
    const anchor = window.scrollY > 0 ? firstOnScreen() : null;
    const before = anchor ? anchor.getBoundingClientRect().top : 0;
    list.prepend(li);
    if (anchor) {
      window.scrollBy(0, anchor.getBoundingClientRect().top - before);
    }
    const empty = document.getElementById("empty");
    if (empty) {
      empty.remove();
    }
  }

  function firstOnScreen() {
    for (const li of list.querySelectorAll("li.item")) {
      if (li.getBoundingClientRect().bottom > 0) {
        return li;
      }
    }
    return null;
  }

  function withdrawn(f) {
    for (const li of list.querySelectorAll("li.item")) {
      if (li.dataset.fingerprint === f.fingerprint) {
        li.classList.add("withdrawn");
        li.title = "withdrawn: later data showed it no longer holds";
      }
    }
  }

  document.documentElement.classList.add("no-anchoring");  // the scroll is kept above
  const source = new EventSource(list.dataset.stream);
  source.onopen = function () {
    status.textContent = "live";
    status.className = "live on";
  };
  source.onerror = function () {
    status.textContent = "reconnecting…";
    status.className = "live off";
    if (source.readyState === EventSource.CLOSED) {
      // Refused for good (the database no longer knows this page's cursor): a fresh page
      // starts from the standing findings and a cursor of now.
      setTimeout(function () { window.location.reload(); }, 5000);
    }
  };
  source.onmessage = function (e) {
    add(JSON.parse(e.data), e.lastEventId);
  };
  source.addEventListener("withdrawn", function (e) {
    withdrawn(JSON.parse(e.data));
  });
})();

// The work queue: the page is not rearranged under the officer's pointer while new findings
// arrive; the header counts them and offers a reload. The tick box in the head ticks every row.
(function () {
  "use strict";
  const news = document.getElementById("news");
  const all = document.getElementById("all-rows");
  if (all) {
    all.addEventListener("change", function () {
      for (const box of document.querySelectorAll("#queue input[name=finding]")) {
        box.checked = all.checked;
      }
    });
  }
  if (!news || !window.EventSource) {
    return;
  }
  let arrived = 0;
  const source = new EventSource(news.dataset.stream);
  source.onmessage = function () {
    arrived += 1;
    news.textContent = "";
    const link = document.createElement("a");
    link.href = window.location.pathname + window.location.search;
    link.textContent = arrived + (arrived === 1 ? " new finding" : " new findings") + ": reload";
    news.appendChild(link);
  };
})();
