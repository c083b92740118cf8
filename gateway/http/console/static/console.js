// kbgate console: the only script. A form marked data-busy disables its button while it runs.
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  const label = form instanceof HTMLFormElement ? form.dataset.busy : undefined;
  const button = label ? form.querySelector("button[type=submit]") : null;
  if (button) {
    setTimeout(() => { button.disabled = true; button.textContent = label; }, 0);
  }
});
