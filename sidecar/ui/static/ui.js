// The memory browser's progressive enhancements. Every page works without this file:
// it only saves a click or a page load. No build step, no dependency.
(() => {
  "use strict";

  const typing = (el) =>
    el instanceof HTMLElement &&
    (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));

  // "/" jumps to the search box, as on many sites.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) return;
    const box = document.getElementById("q");
    if (!box) return;
    event.preventDefault();
    box.focus();
    box.select();
  });

  // A select marked data-autosubmit applies its choice at once.
  for (const select of document.querySelectorAll("select[data-autosubmit]")) {
    select.addEventListener("change", () => select.form && select.form.requestSubmit());
  }

  // Selecting memories to forget: "select all", and the button says how many.
  const all = document.getElementById("select-all");
  const button = document.getElementById("forget-selected");
  const picks = () => Array.from(document.querySelectorAll("input.pick"));
  const count = () => {
    if (!button) return;
    const n = picks().filter((p) => p.checked).length;
    button.textContent = n ? `Forget ${n} selected…` : "Forget selected…";
    button.disabled = n === 0;
  };
  if (all) {
    all.hidden = false;
    all.closest("label").hidden = false;
    all.addEventListener("change", () => {
      for (const p of picks()) p.checked = all.checked;
      count();
    });
  }
  for (const p of picks()) p.addEventListener("change", count);
  count();

  // A summary of the DAG loads what it summarizes when it is opened, in place.
  document.addEventListener(
    "toggle",
    async (event) => {
      const details = event.target;
      if (!(details instanceof HTMLDetailsElement) || !details.open) return;
      const url = details.dataset.expand;
      if (!url || details.dataset.loaded) return;
      details.dataset.loaded = "1";
      const box = details.querySelector(".kids");
      box.setAttribute("aria-busy", "true");
      try {
        const reply = await fetch(url, {
          credentials: "same-origin",
          headers: { "X-Fragment": "1" },
        });
        if (!reply.ok) throw new Error(String(reply.status));
        box.innerHTML = await reply.text(); // escaped by the server
      } catch (error) {
        delete details.dataset.loaded;
        box.prepend(`Could not load it (${error.message}); the link opens it as a page. `);
      } finally {
        box.removeAttribute("aria-busy");
      }
    },
    true,
  );
})();
