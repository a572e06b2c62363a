// The workspace log in Debian's Chromium (driven by
// TestBrowserWorkspaceLog in cmd/cove): what cove did not honour in the
// project's devcontainer.json is counted on a badge in the status bar,
// which opens the log; there each note is shown once, and the lifecycle
// command's output as text (its <b> not bold, its escape sequences gone),
// and again so after a reload; the badge stands out until the log was seen.
// Usage: node notes.mjs URL NOTE OUTPUT (NOTE: a note's text; OUTPUT: a
// line the postCreateCommand printed, as it should read). Prints "ok"
// last when every check passed. COVE_SCREENSHOTS=DIR saves the IDE with
// its log open there (ide-workspace-log.png).
import { open } from "./browser.mjs";

const [url, note, output] = process.argv.slice(2);
const { browser, page, fail, shellReady } = await open("notes", { viewport: { width: 1280, height: 800 } });
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));
page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });

// check looks at the badge and the log as the user sees them.
async function check(when) {
  await page.waitForFunction(() => !document.querySelector("#st-notes").hidden, null, { timeout: 15000 })
    .catch(() => fail(`${when}: no notes badge in the status bar`));
  const badge = await page.$eval("#st-notes", (b) => {
    const r = b.getBoundingClientRect();
    return { text: b.textContent, onScreen: r.width > 0 && r.height > 0 && r.bottom <= innerHeight && r.right <= innerWidth };
  });
  if (!badge.onScreen) await fail(`${when}: the badge is not on screen`);
  // It stands out until the log has been seen, a reload remembering it.
  const seen = () => page.$eval("#st-notes", (b) => b.classList.contains("seen"));
  if ((await seen()) !== (when !== "at first")) await fail(`${when}: the badge is ${(await seen()) ? "" : "not "}marked seen`);
  await page.click("#st-notes");
  await page.waitForFunction(() => !document.querySelector("#log").hidden && document.querySelector("#log").getBoundingClientRect().height > 40, null, { timeout: 5000 })
    .catch(() => fail(`${when}: the badge did not open the workspace log`));
  // The postCreateCommand runs before the page opens: its line is there.
  await page.waitForFunction((o) => [...document.querySelectorAll("#log .log-line")].some((l) => l.textContent === o), output, { timeout: 10000 })
    .catch(async () => fail(`${when}: no line ${JSON.stringify(output)} in the log: ${JSON.stringify(await page.$eval("#log", (l) => l.innerText))}`));
  const log = await page.$eval("#log", (l) => ({
    notes: [...l.querySelectorAll(".log-line.note")].map((n) => n.textContent),
    output: [...l.querySelectorAll(".log-line.output")].map((n) => n.textContent),
    elements: [...l.querySelectorAll(".log-line *")].map((e) => e.tagName).filter((t) => t !== "SPAN"),
    active: document.querySelector("#log-tab").classList.contains("active"),
  }));
  const mine = log.notes.filter((n) => n.includes(note));
  if (mine.length !== 1) await fail(`${when}: the note is shown ${mine.length} times: ${JSON.stringify(log.notes)}`);
  if (badge.text !== `⚠ ${log.notes.length} note${log.notes.length === 1 ? "" : "s"}`) await fail(`${when}: the badge says ${badge.text}, the log has ${log.notes.length} notes`);
  if (!log.active) await fail(`${when}: the log's tab is not the active one`);
  if (!(await seen())) await fail(`${when}: the log was opened, and the badge still stands out`);
  if (log.elements.length) await fail(`${when}: the workspace's output made elements: ${log.elements}`);
  if (log.output.some((o) => /[\x00-\x08\x0b-\x1f\u241b]/.test(o))) await fail(`${when}: control characters in the log: ${JSON.stringify(log.output)}`);
  const bold = await page.$$eval("#log .log-line", (ls) => ls.some((l) => Number(getComputedStyle(l).fontWeight) >= 600));
  if (bold) await fail(`${when}: a line of the log is bold`);
}

await page.goto(url);
await shellReady(page, "the IDE did not load");
await check("at first");
if (process.env.COVE_SCREENSHOTS) await page.screenshot({ path: `${process.env.COVE_SCREENSHOTS}/ide-workspace-log.png` });
// A terminal shown again hides the log; the badge opens it again.
await page.click("#term-tabs .tab:not(#log-tab):not(#ports-tab):not(#problems-tab):not(#new-term)");
if (!(await page.$eval("#log", (l) => l.hidden))) await fail("a terminal's tab did not hide the log");
await page.reload();
await shellReady(page, "the IDE did not load again");
await check("after a reload");
if (errors.length) await fail(`page errors: ${errors.join("; ")}`);
await browser.close();
console.log("ok");
