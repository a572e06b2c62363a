// The Source Control view in Debian's Chromium, git in the workspace
// (driven by TestBrowserSourceControl in cmd/cove): a change made in the
// terminal shows, with its diff; stage, unstage, discard, commit, branch.
// Usage: node scm.mjs URL. Prints "ok" when every check passed.
import { open } from "./browser.mjs";
import { shot } from "./shot.mjs";

const [url] = process.argv.slice(2);
const { browser, page, fail, wait, shellReady } = await open("scm e2e");
const scmText = () => page.textContent("#scm-box");
const row = (path, side) => `#scm-box .scm-file[data-path="${path}"][data-side="${side}"]`;
const has = (path, side) => wait((sel) => document.querySelector(sel), row(path, side), async () => `${path} is not under ${side}: ${await scmText()}; status: ${await page.textContent("#status")}`);
const gone = (path, side) => wait((sel) => !document.querySelector(sel), row(path, side), async () => `${path} is still under ${side}: ${await scmText()}`);
const press = async (path, side, button) => {
  await page.hover(row(path, side));
  await page.click(`${row(path, side)} .${button}`);
};
// The dialogs' answers, in order: a string answers a prompt, true accepts.
const answers = [];
const asked = [];

try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
  page.on("dialog", (d) => {
    asked.push(d.message());
    const a = answers.shift();
    return a === undefined ? d.dismiss() : d.accept(typeof a === "string" ? a : undefined);
  });
  await page.goto(url);
  await shellReady();
  await wait(() => document.querySelector("#scm-box")?.dataset.state === "repo", null, async () => `no repository: ${await scmText()}`);

  // Changes made in the terminal.
  await page.click("#terms .term-pane:not([hidden])");
  await page.keyboard.type("echo changed-in-terminal >> hello.txt; echo changed >> other.txt; echo new > new.txt; sed -i 's/^line 3$/FIRST CHANGE/; s/^line 27$/SECOND CHANGE/' long.txt\n");
  await has("hello.txt", "changes");
  await has("other.txt", "changes");
  await has("new.txt", "changes");
  await has("long.txt", "changes");

  // long.txt's two hunks, one at a time: the second staged, then the
  // first; then, from the staged side, the first unstaged again.
  const hunkButtons = (op) => page.evaluate((op) => [...document.querySelectorAll(`#scm-diff .scm-${op}`)].map((b) => b.dataset.hunk), op);
  const clickHunk = async (op, n, left) => {
    await page.click(`#scm-diff .scm-${op}[data-hunk="${n}"]`);
    await wait(([op, left]) => document.querySelectorAll(`#scm-diff .scm-${op}`).length === left, [op, left],
      async () => `after ${op} ${n}: buttons ${JSON.stringify(await hunkButtons(op))}; status: ${await page.textContent("#status")}`);
  };
  await page.click(`${row("long.txt", "changes")} .scm-name`);
  await wait(() => document.querySelectorAll("#scm-diff .scm-stage-hunk").length === 2, null, async () => `long.txt's stage buttons: ${JSON.stringify(await hunkButtons("stage-hunk"))}`);
  await clickHunk("stage-hunk", 1, 1);
  await has("long.txt", "staged");
  await has("long.txt", "changes");
  await clickHunk("stage-hunk", 0, 0);
  await gone("long.txt", "changes");
  await page.click(`${row("long.txt", "staged")} .scm-name`);
  await wait(() => document.querySelector("#scm-diff")?.dataset.staged === "1" && document.querySelectorAll("#scm-diff .scm-unstage-hunk").length === 2, null,
    async () => `long.txt's unstage buttons: ${JSON.stringify(await hunkButtons("unstage-hunk"))}`);
  await clickHunk("unstage-hunk", 0, 1);
  await has("long.txt", "changes");
  await page.click("#scm-diff .scm-diff-head button");

  // hello.txt's diff in the merge view.
  await page.click(`${row("hello.txt", "changes")} .scm-name`);
  await wait(() => document.querySelector("#scm-diff .cm-mergeView"), null, "no merge view");
  const sides = await page.evaluate(() => [...document.querySelectorAll("#scm-diff .cm-mergeViewEditor")].map((e) => e.textContent));
  if (sides.length !== 2 || sides[0].includes("changed-in-terminal") || !sides[1].includes("changed-in-terminal")) await fail(`the merge view's sides: ${JSON.stringify(sides)}`);
  await shot(page, "ide-source-control.png", ["#side", "#main"]);
  await page.click("#scm-diff .scm-diff-head button");

  // Stage, unstage; discard after asking.
  await press("hello.txt", "changes", "scm-stage");
  await has("hello.txt", "staged");
  await press("new.txt", "changes", "scm-stage");
  await has("new.txt", "staged");
  await press("new.txt", "staged", "scm-unstage");
  await gone("new.txt", "staged");
  await has("new.txt", "changes");
  answers.push(undefined); // first: no
  await press("other.txt", "changes", "scm-discard");
  await page.waitForTimeout(300);
  await has("other.txt", "changes");
  answers.push(true);
  await press("other.txt", "changes", "scm-discard");
  await gone("other.txt", "changes");
  if (!asked.every((q) => /Discard your changes to other.txt/.test(q))) await fail(`asked: ${asked}`);

  // Commit what is staged.
  await page.fill("#scm-message", "Change hello from the IDE");
  await page.click("#scm-commit");
  await wait(() => document.querySelector("#status").textContent === "committed", null, async () => `not committed: ${await page.textContent("#status")}`);
  await gone("hello.txt", "staged");
  await has("new.txt", "changes");

  // A new branch.
  answers.push("feature-x", true);
  await page.click("#scm-branch");
  await wait(() => document.querySelector("#scm-branch").textContent === "⎇ feature-x", null, async () => `the branch: ${await page.textContent("#scm-branch")}; ${await page.textContent("#status")}`);
  // The user's settings: in the editor, and again when they change.
  await page.click('.entry[data-path="hello.txt"]');
  await wait(() => window.cove.docs.get("hello.txt"), null, "hello.txt did not open");
  const prefs = () => page.evaluate(() => {
    const { view } = window.cove.docs.get("hello.txt").doc;
    return { font: getComputedStyle(view.dom).fontSize, tab: view.state.tabSize, wrap: view.contentDOM.classList.contains("cm-lineWrapping") };
  });
  const first = await prefs();
  if (first.font !== "19px" || first.tab !== 3 || first.wrap) await fail(`the settings in the editor: ${JSON.stringify(first)}`);
  console.log("cove-test: settings");
  await wait(() => {
    const { view } = window.cove.docs.get("hello.txt").doc;
    return getComputedStyle(view.dom).fontSize === "23px" && view.contentDOM.classList.contains("cm-lineWrapping");
  }, null, async () => `the changed settings did not apply: ${JSON.stringify(await prefs())}`, 10000);
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
