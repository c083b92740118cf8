// kbgate console: the only script. A form marked data-busy disables its button while it runs;
// one marked data-confirm asks first; the upload form sends one file per request, with
// a progress line and each file's outcome (without this script it posts them all at once).
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) {
    return;
  }
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    event.preventDefault();
    return;
  }
  if (form.id === "upload-form") {
    event.preventDefault();
    uploadEach(form);
    return;
  }
  const label = form.dataset.busy;
  const button = label ? form.querySelector("button[type=submit]") : null;
  if (button) {
    setTimeout(() => { button.disabled = true; button.textContent = label; }, 0);
  }
});

const STATUS_WORDS = { indexed: "indexed", unchanged: "unchanged", held_back: "held back", failed: "failed" };

function outcomeItem(result) {
  const item = document.createElement("li");
  item.dataset.status = result.status;
  const file = document.createElement("span");
  file.className = "file";
  file.textContent = result.file;
  const badge = document.createElement("span");
  badge.className = "badge " + (result.status === "indexed" || result.status === "unchanged" ? "ok" : "warn");
  badge.textContent = STATUS_WORDS[result.status] || result.status;
  const detail = document.createElement("span");
  if (result.status === "indexed") {
    detail.className = "muted";
    detail.textContent = result.passages + (result.passages === 1 ? " passage" : " passages") + " as " + result.document_id;
  } else if (result.status === "unchanged") {
    detail.className = "muted";
    detail.textContent = "same content as " + result.document_id + ": nothing re-embedded";
  } else {
    detail.className = "reason";
    detail.textContent = result.reason || "";
  }
  item.append(file, " ", badge, " ", detail);
  return item;
}

function refusal(response) {
  if (response.status === 413) {
    return "the file is larger than the gateway accepts in one request (KBGATE_MAX_BODY_BYTES)";
  }
  if (response.status === 429) {
    return "too many requests: wait a moment and upload it again";
  }
  if (response.redirected || response.status === 401 || response.status === 403) {
    return "the console session ended: sign in again";
  }
  return "the gateway answered " + response.status + "; nothing was written";
}

async function uploadOne(form, file) {
  const body = new FormData();
  for (const name of ["csrf_token", "kb_id", "classification"]) {
    body.append(name, form.elements[name].value);
  }
  body.append("files", file, file.name);
  try {
    const response = await fetch(form.action, {
      method: "POST", body, credentials: "same-origin", headers: { Accept: "application/json" },
    });
    const type = response.headers.get("content-type") || "";
    if (response.ok && type.includes("application/json")) {
      const answer = await response.json();
      if (answer.results && answer.results.length === 1) {
        return answer.results[0];
      }
    }
    return { file: file.name, status: "failed", reason: refusal(response) };
  } catch (error) {
    return { file: file.name, status: "failed", reason: "the gateway could not be reached" };
  }
}

async function uploadEach(form) {
  const files = Array.from(form.elements.files.files);
  const progress = document.getElementById("upload-progress");
  const results = document.getElementById("upload-results");
  const button = form.querySelector("button[type=submit]");
  if (files.length === 0) {
    progress.textContent = "Choose at least one file.";
    return;
  }
  button.disabled = true;
  results.replaceChildren();
  const counts = { indexed: 0, unchanged: 0, held_back: 0, failed: 0 };
  for (const [index, file] of files.entries()) {
    progress.textContent = "Uploading " + (index + 1) + " of " + files.length + ": " + file.name + "…";
    const result = await uploadOne(form, file);
    counts[result.status] = (counts[result.status] || 0) + 1;
    results.append(outcomeItem(result));
  }
  progress.textContent = "Done, " + files.length + " file" + (files.length === 1 ? "" : "s") + ": " +
    counts.indexed + " indexed, " + counts.unchanged + " unchanged, " + counts.held_back +
    " held back, " + counts.failed + " failed. ";
  const reload = document.createElement("a");
  reload.href = window.location.href;
  reload.textContent = "Show the updated document list";
  progress.append(reload);
  button.disabled = false;
  form.elements.files.value = "";
}
