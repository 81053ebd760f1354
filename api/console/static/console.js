// OwnSona console: small progressive enhancements. Every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // "Select all" checkboxes: <input type="checkbox" data-select-all="NAME"> toggles every
  // checkbox named NAME in the same form.
  for (const master of document.querySelectorAll("input[data-select-all]")) {
    master.addEventListener("change", () => {
      const form = master.form || document;
      for (const box of form.querySelectorAll(`input[type=checkbox][name="${master.dataset.selectAll}"]`)) {
        box.checked = master.checked;
      }
    });
  }
  // Buttons that destroy something ask first: <button data-confirm="Forget 3 memories?">.
  for (const button of document.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
  // A range input shows its value in the <output for=ID> beside it.
  for (const output of document.querySelectorAll("output[for]")) {
    const input = document.getElementById(output.htmlFor.value || output.getAttribute("for"));
    if (input) input.addEventListener("input", () => { output.value = input.value; });
  }
  // Forms that submit on change (filters): <select data-autosubmit>.
  for (const field of document.querySelectorAll("[data-autosubmit]")) {
    field.addEventListener("change", () => field.form && field.form.requestSubmit());
  }
  // A page waiting for a background job: <p data-job-poll="/console/jobs/ID"> reloads the page
  // once the job has ended. Without this script the element's links do the same by hand.
  for (const waiting of document.querySelectorAll("[data-job-poll]")) {
    const poll = async () => {
      try {
        const answer = await fetch(waiting.dataset.jobPoll, { headers: { Accept: "application/json" } });
        if (answer.ok && (await answer.json()).state !== "running") {
          window.location.reload();
          return;
        }
      } catch (_) {
        // A network hiccup: the next poll tries again.
      }
      window.setTimeout(poll, 2000);
    };
    window.setTimeout(poll, 2000);
  }
});
