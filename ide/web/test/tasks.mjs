// The Tasks view in Debian's Chromium (driven by TestBrowserTasks in
// cmd/cove): two tasks t1 (value=right) and t2 (value=other) are listed;
// t1's diff shows in the merge view, and its agent's conversation; its
// own IDE opens, its terminal in its workspace; t1 and t2 compare side by
// side; New task refuses the name t1 (taken), then makes t3 with PROMPT:
// its row shows it running, its agent at work and then its commit and its
// tests passed, and its diff has its change; t1 is merged, and t2,
// stopped, discarded, each after a confirmation.
// Usage: node tasks.mjs URL PROMPT. Prints "ok" when every check passed.
import { open } from "./browser.mjs";
import { shot } from "./shot.mjs";

const [url, newPrompt] = process.argv.slice(2);
const { browser, page, fail, wait, shellReady } = await open("tasks e2e", { timeout: 20000 });
const boxText = () => page.textContent("#tasks-box");
const statusText = () => page.textContent("#status");
const asked = [];

try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("dialog", (d) => (asked.push(d.message()), d.accept()));
  await page.goto(url);

  // Both tasks, running, each with its one commit.
  for (const name of ["t1", "t2"]) {
    await wait((n) => {
      const row = document.querySelector(`#tasks-box .task[data-name="${n}"]`);
      return row && row.dataset.status === "running" && /^1 commit · 1 file changed/.test(row.querySelector(".task-info").textContent);
    }, name, async () => `task ${name} is not listed, running with one commit: ${await boxText()}`);
  }
  if (!(await boxText()).includes("make the value value=right")) await fail(`t1's prompt is not shown: ${await boxText()}`);

  // t1's diff in the merge view: the base's line left, the task's right.
  await page.click('#tasks-box .task[data-name="t1"] .task-name');
  await wait(() => document.querySelectorAll("#task-diff .cm-editor").length === 2, null, async () => `no merge view for t1: ${await statusText()}`);
  const sides = () => page.evaluate(() => [...document.querySelectorAll("#task-diff .cm-editor")].map((e) => e.cmView?.view?.state.doc.toString() ?? e.querySelector(".cm-content").textContent));
  let [a, b] = await sides();
  if (!a.includes("value=wrong") || a.includes("value=right") || !b.includes("value=right") || b.includes("value=wrong") || !b.includes("diff --git a/values.sh")) {
    await fail(`t1's merge view: left ${JSON.stringify(a)}, right ${JSON.stringify(b)}`);
  }
  await shot(page, "tasks.png", ["#side", "#task-diff"]);
  await page.click("#task-diff .task-close");

  // t1's agent's conversation: the prompt, the edit it called.
  await page.click('#tasks-box .task[data-name="t1"] .task-transcript');
  await wait(() => /make the value value=right[\s\S]*→ edit/.test(document.querySelector("#task-diff .task-transcript-text")?.textContent), null,
    async () => `no transcript of t1: ${await statusText()}; ${await page.evaluate(() => document.querySelector("#task-diff")?.textContent)}`);
  await page.click("#task-diff .task-close");

  // t1's own IDE in a new window: its terminal runs in t1's workspace,
  // where values.sh has t1's change.
  const [popup] = await Promise.all([page.context().waitForEvent("page"), page.click('#tasks-box .task[data-name="t1"] .task-open')]);
  await popup.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/\?token=/, { timeout: 60000 }).catch(async () => fail(`t1's IDE did not open: ${popup.url()}; ${await statusText()}`));
  await shellReady(popup, "no terminal in t1's IDE");
  await popup.click("#terms .term-pane:not([hidden])");
  await popup.keyboard.type("cat values.sh | tr = :\n");
  const screen = () => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    const lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
    return lines.join("\n");
  };
  await popup.waitForFunction(() => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (b.getLine(i).translateToString(true) === "value:right") return true;
    return false;
  }, null, { timeout: 15000 }).catch(async () => fail(`t1's terminal does not show its change: ${await popup.evaluate(screen)}`));
  await popup.close();

  // The two tasks' diffs side by side.
  await page.click('#tasks-box .task[data-name="t1"] .task-compare');
  await wait(() => document.querySelector("#task-diff")?.dataset.name === "t1-t2", null, async () => `no comparison: ${await statusText()}`);
  await page.waitForTimeout(300);
  [a, b] = await sides();
  if (!a.includes("+value=right") || !b.includes("+value=other")) await fail(`the comparison: left ${JSON.stringify(a)}, right ${JSON.stringify(b)}`);
  await page.click("#task-diff .task-close");

  // New task: a taken name is refused, saying so; t3 is made and its
  // agent (the launcher's scripted model) edits, runs the tests, commits.
  const newTask = async (name, prompt) => {
    if (await page.isHidden("#tasks-box .task-new-form")) await page.click("#tasks-box .task-new");
    await page.fill("#tasks-box .task-new-name", name);
    await page.fill("#tasks-box .task-new-prompt", prompt);
    await page.click("#tasks-box .task-new-start");
  };
  await newTask("t1", "again");
  await wait(() => /^new task t1: .*task t1 exists/.test(document.querySelector("#status").textContent), null, async () => `New task t1 is not refused as taken: ${await statusText()}`);
  const t0 = Date.now();
  await newTask("t3", newPrompt);
  await wait(() => /^task t3: its agent is starting/.test(document.querySelector("#status").textContent) && document.querySelector('#tasks-box .task[data-name="t3"]'), null,
    async () => `t3 is not listed once made: ${await statusText()}; ${await boxText()}`);
  if (!(await page.isHidden("#tasks-box .task-new-form"))) await fail("the New task form is still open after t3 started");
  await wait(() => {
    const row = document.querySelector('#tasks-box .task[data-name="t3"]');
    return row && row.dataset.status === "running" && row.dataset.agent === "" && row.dataset.tests === "passed" &&
      /^1 commit · 1 file changed/.test(row.querySelector(".task-info").textContent) && /tests passed/.test(row.textContent);
  }, null, async () => `t3 is not listed running, done, with its commit and its tests passed: ${await page.evaluate(() => {
    const row = document.querySelector('#tasks-box .task[data-name="t3"]');
    return row ? JSON.stringify(row.dataset) + " " + row.textContent : "no row";
  })}; ${await statusText()}`, 120000);
  console.log(`cove-test: t3, made from the page, listed done with its commit after ${Date.now() - t0} ms`);
  const t1Tests = await page.getAttribute('#tasks-box .task[data-name="t1"]', "data-tests");
  if (t1Tests !== "-") await fail(`t1's agent ran no tests, but its row says ${t1Tests}`);
  await page.click('#tasks-box .task[data-name="t3"] .task-name');
  await wait(() => document.querySelector("#task-diff")?.dataset.name === "t3" && document.querySelectorAll("#task-diff .cm-editor").length === 2, null, async () => `no merge view for t3: ${await statusText()}`);
  [a, b] = await sides();
  if (!a.includes("value=wrong") || !b.includes("value=third")) await fail(`t3's merge view: left ${JSON.stringify(a)}, right ${JSON.stringify(b)}`);
  await page.click("#task-diff .task-close");

  // t2 stopped (the test stops its workspace on this line): listed so,
  // and discarded as it is.
  console.log("cove-test: stop t2");
  await wait(() => (window.cove.tasks.refresh(), document.querySelector('#tasks-box .task[data-name="t2"]')?.dataset.status === "stopped"), null,
    async () => `t2 is not listed as stopped: ${await boxText()}`, 60000);

  // Merge t1, discard t2, each after its question.
  await page.click('#tasks-box .task[data-name="t1"] .task-merge');
  await wait(() => /^merged t1/.test(document.querySelector("#status").textContent), null, async () => `t1 is not merged: ${await statusText()}`, 60000);
  await page.click('#tasks-box .task[data-name="t2"] .task-discard');
  await wait(() => !document.querySelector('#tasks-box .task[data-name="t2"]'), null, async () => `t2 is still listed: ${await statusText()}; ${await boxText()}`, 60000);
  if (asked.length !== 2 || !/^Merge task t1/.test(asked[0]) || !/^Discard task t2/.test(asked[1])) await fail(`the questions asked: ${JSON.stringify(asked)}`);
  if (errors.length) await fail(`page errors: ${errors.join("; ")}`);
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
