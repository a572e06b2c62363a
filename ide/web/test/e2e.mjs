// Drives the IDE in Debian's Chromium (playwright-core, no browser
// download): a terminal runs a command in the workspace, and a file is
// opened, edited and saved. Usage: node e2e.mjs URL [SCREENSHOT.png]
import { open } from "./browser.mjs";
import { firstShellWait } from "./trace.mjs";

const [url, shot] = process.argv.slice(2);
const { browser, page, fail, shellReady } = await open("e2e", { viewport: { width: 1280, height: 800 } });
try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  // The page runs under the launcher's Content-Security-Policy: anything
  // it blocks (a style, a worker, a connection) is a broken feature.
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
  await page.goto(url);
  if (page.url().includes("token")) await fail("the token stayed in the address bar: " + page.url());
  await page.waitForSelector(".xterm", { timeout: 15000 });

  // The terminal: type a command, read the screen through xterm's buffer.
  const screen = () => page.evaluate(() => {
    const t = window.cove.shells[0].shell.term;
    const b = t.buffer.active;
    const lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
    return lines.join("\n");
  });
  await shellReady();
  await page.click(".term-pane");
  await page.keyboard.type("echo browser-$((6*7)) in $(hostname)\n");
  await page.waitForFunction(() => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (/browser-42 in /.test(b.getLine(i).translateToString(true))) return true;
    return false;
  }, null, { timeout: 15000 }).catch(async () => fail("the terminal never showed the output:\n" + (await screen())));
  const hostLine = (await screen()).split("\n").find((l) => /^browser-42 in /.test(l));
  console.log("terminal: " + hostLine);
  // Find in the terminal (Ctrl+F): the match is selected; Escape gives
  // the keys back to the shell.
  await page.keyboard.press("Control+f");
  await page.waitForSelector(".term-find:not([hidden])", { timeout: 5000 }).catch(() => fail("Ctrl+F opened no find box"));
  await page.keyboard.type("browser-42");
  await page.keyboard.press("Enter");
  const sel = await page.evaluate(() => window.cove.shells[0].shell.term.getSelection());
  if (sel !== "browser-42") await fail("find selected " + JSON.stringify(sel));
  await page.keyboard.press("Escape");
  if (!(await page.$(".term-find[hidden]"))) await fail("Escape did not close the find box");

  // The editor: open hello.txt from the tree, add a line, Ctrl-S.
  await page.click('.entry[data-path="hello.txt"]');
  await page.waitForSelector(".cm-content", { timeout: 10000 });
  const text = await page.textContent(".cm-content");
  if (!text.includes("hi")) await fail("the editor shows " + JSON.stringify(text));
  await page.click(".cm-content");
  await page.keyboard.press("Control+End");
  await page.keyboard.type("edited in the browser");
  await page.waitForSelector(".tab.dirty");
  await page.keyboard.press("Control+s");
  await page.waitForSelector(".tab.dirty", { state: "detached", timeout: 10000 });
  const onDisk = await page.evaluate(() => fetch("/api/file?path=hello.txt").then((r) => r.text()));
  if (onDisk !== "hi\nedited in the browser") await fail("after Ctrl-S the file holds " + JSON.stringify(onDisk));
  // A change on disk (here: by a command in the terminal) shows in the
  // editor, which has no unsaved changes now.
  await page.click(".term-pane");
  await page.keyboard.type("printf 'rewritten by the shell\\n' > hello.txt\n");
  await page.waitForFunction(() => document.querySelector(".cm-content").textContent.includes("rewritten by the shell"), null, { timeout: 10000 })
    .catch(async () => fail("the editor did not follow the change on disk: " + (await page.textContent(".cm-content"))));
  // And the tree shows a new file.
  await page.keyboard.type("touch made-in-terminal.txt\n");
  await page.waitForSelector('.entry[data-path="made-in-terminal.txt"]', { timeout: 10000 })
    .catch(async () => fail("the tree did not show the new file"));

  // Files from the UI: a new file (in a new folder) opens in the editor.
  const disk = (p) => page.evaluate((p) => fetch(`/api/file?path=${p}`).then((r) => (r.ok ? r.text() : `(${r.status})`)), p);
  // answer handles the next dialog; it resolves to the dialog's message.
  const answer = (value) => new Promise((resolve) => page.once("dialog", async (d) => {
    resolve(d.message());
    await (value === false ? d.dismiss() : value === true ? d.accept() : d.accept(value));
  }));
  answer("ops/new.txt");
  await page.click("#new-file");
  await page.waitForSelector('.tab[title="ops/new.txt"].active', { timeout: 10000 }).catch(() => fail("the new file did not open"));
  if ((await disk("ops/new.txt")) !== "") await fail("the new file on disk: " + (await disk("ops/new.txt")));
  // A save over a change on disk asks first; no is no, yes overwrites.
  await page.click(".pane:not([hidden]) .cm-content");
  await page.keyboard.type("draft from the editor");
  await page.click(".term-pane");
  await page.keyboard.type("echo from the terminal > ops/new.txt\n");
  await page.waitForFunction(() => document.querySelector("#status").textContent.includes("changed on disk"), null, { timeout: 10000 })
    .catch(async () => fail("no word of the change on disk: " + (await page.textContent("#status"))));
  await page.click(".pane:not([hidden]) .cm-content");
  const asked = answer(false);
  await page.keyboard.press("Control+s");
  const question = await Promise.race([asked, new Promise((r) => setTimeout(() => r(null), 10000))]);
  if (!question || !question.includes("changed on disk")) await fail("a save over a change on disk asked: " + question);
  await page.waitForTimeout(300); // what a refused save would have written
  if ((await disk("ops/new.txt")) !== "from the terminal\n") await fail("a refused overwrite wrote: " + (await disk("ops/new.txt")));
  if (!(await page.$('.tab.dirty[title="ops/new.txt"]'))) await fail("after a refused overwrite the tab is not marked unsaved");
  answer(true);
  await page.keyboard.press("Control+s");
  await page.waitForSelector(".tab.dirty", { state: "detached", timeout: 10000 }).catch(() => fail("the forced save left the tab dirty"));
  if ((await disk("ops/new.txt")) !== "draft from the editor") await fail("the forced save wrote: " + (await disk("ops/new.txt")));
  // Rename with F2 in the tree: the open editor follows.
  await page.click('.entry[data-path="ops"]');
  await page.click('.entry[data-path="ops/new.txt"]');
  answer("ops/renamed.txt");
  await page.keyboard.press("F2");
  await page.waitForSelector('.tab[title="ops/renamed.txt"]', { timeout: 10000 }).catch(async () => fail("the tab did not follow the rename: " + (await page.textContent("#status"))));
  await page.waitForSelector('.entry[data-path="ops/renamed.txt"]', { timeout: 10000 }).catch(() => fail("the tree did not show the renamed file"));
  if ((await disk("ops/renamed.txt")) !== "draft from the editor" || (await disk("ops/new.txt")) !== "(404)") await fail("the rename on disk");
  // Delete the folder from its context menu: gone from disk, the tree and the tabs.
  await page.click('.entry[data-path="ops"]', { button: "right" });
  answer(true);
  await page.click("#menu button:has-text('Delete')");
  await page.waitForSelector('.entry[data-path="ops"]', { state: "detached", timeout: 10000 }).catch(() => fail("the tree still shows ops"));
  if ((await disk("ops/renamed.txt")) !== "(404)") await fail("ops/renamed.txt is still on disk");
  if (await page.$('.tab[title="ops/renamed.txt"]')) await fail("the deleted file's tab stayed open");
  await page.click('.entry[data-path="hello.txt"]');

  // What .gitignore hides is dimmed in the tree; the rest is not.
  await page.waitForSelector('.entry.ignored[data-path="secret.txt"]', { timeout: 10000 })
    .catch(async () => fail("secret.txt (ignored) is not dimmed"));
  if (await page.$('.entry.ignored[data-path="notes.md"]')) await fail("notes.md is dimmed but not ignored");

  // Search (Ctrl+Shift+F): case-insensitive, .gitignore honoured; a hit
  // opens its file with the cursor on the line.
  await page.keyboard.press("Control+Shift+F");
  await page.keyboard.type("NEEDLE-77");
  await page.keyboard.press("Enter");
  await page.waitForSelector(".search-hit", { timeout: 10000 })
    .catch(async () => fail("no search results: " + (await page.textContent("#search-results"))));
  const hits = await page.$$eval(".search-hit", (hs) => hs.map((h) => `${h.dataset.path}:${h.dataset.line}`));
  if (hits.join(",") !== "notes.md:2") await fail("search hits: " + hits.join(","));
  await page.click(".search-hit");
  await page.waitForFunction(() => (document.querySelector(".pane:not([hidden]) .cm-activeLine") || {}).textContent === "find needle-77 here", null, { timeout: 10000 })
    .catch(async () => fail("the hit did not open at its line"));
  // Replace in files: what the search found, after a confirmation; the
  // ignored file keeps its match.
  await page.click("#search-replace");
  await page.fill("#replace", "pin-88");
  const confirmReplace = answer(true);
  await page.click("#replace-all");
  const replaceQuestion = await confirmReplace;
  if (!replaceQuestion.includes("Replace 1 match in 1 file")) await fail("the replace asked: " + replaceQuestion);
  await page.waitForFunction(() => document.querySelector("#status").textContent.startsWith("replaced 1 in 1 file"), null, { timeout: 10000 })
    .catch(async () => fail("replace said: " + (await page.textContent("#status"))));
  if ((await disk("notes.md")) !== "line one\nfind pin-88 here\n") await fail("notes.md after the replace: " + (await disk("notes.md")));
  if ((await disk("secret.txt")) !== "needle-77 (ignored)\n") await fail("the ignored file changed: " + (await disk("secret.txt")));
  await page.click("#search-replace");
  await page.fill("#search", "");

  // A shell script is highlighted (its language loads on demand).
  await page.click('.entry[data-path="tool.sh"]');
  await page.waitForFunction(() => document.querySelectorAll('.pane:not([hidden]) .cm-line span').length >= 2, null, { timeout: 10000 })
    .catch(async () => fail("tool.sh is not highlighted: " + (await page.innerHTML(".pane:not([hidden]) .cm-content"))));

  // Quick open (Ctrl+P): a few letters of the name, in order, find it.
  await page.keyboard.press("Control+p");
  await page.waitForSelector("#quick input", { timeout: 5000 }).catch(() => fail("Ctrl+P opened no box"));
  await page.keyboard.type("mdintrm");
  await page.waitForFunction(() => document.querySelector(".quick-item.selected")?.dataset.path === "made-in-terminal.txt", null, { timeout: 5000 })
    .catch(async () => fail("quick open offers: " + (await page.$$eval(".quick-item", (is) => is.map((i) => i.dataset.path).join(",")))));
  if (await page.$('.quick-item[data-path="secret.txt"]')) await fail("quick open offers an ignored file");
  await page.keyboard.press("Enter");
  await page.waitForSelector('.tab.active[title="made-in-terminal.txt"]', { timeout: 5000 }).catch(() => fail("Enter did not open the file"));
  await page.click('.entry[data-path="hello.txt"]');

  // The agent panel: a prompt, an edit to approve (its diff shown), the
  // answer; the editor follows the agent's change on disk.
  await page.keyboard.press("Control+Alt+i");
  if (!(await page.evaluate(() => document.activeElement.id === "agent-input"))) await fail("Ctrl+Alt+I did not go to the agent");
  await page.fill("#agent-input", "make hello.txt friendlier");
  await page.press("#agent-input", "Enter");
  await page.waitForSelector(".approval .merge .cm-changedLine", { timeout: 15000 })
    .catch(async () => fail("no approval card with the edit: " + (await page.textContent("#agent-log"))));
  // The conversation is the workspace's: a reload shows it again, the
  // approval still waiting for an answer.
  await page.reload();
  await page.waitForSelector(".approval .merge .cm-changedLine", { timeout: 15000 })
    .catch(async () => fail("the approval did not come back after a reload: " + (await page.textContent("#agent-log"))));
  if (!(await page.textContent("#agent-log .msg.user")).includes("make hello.txt friendlier")) await fail("the prompt did not come back after a reload");
  if (await page.isDisabled(".approval .approve")) await fail("the pending approval came back answered");
  if (!(await page.title()).startsWith("(1) ")) await fail("the window's title does not say the agent asks: " + (await page.title()));
  // The edit in a merge view: the new line, and the one it replaces.
  const added = await page.textContent(".approval .merge .cm-changedLine");
  const removed = await page.textContent(".approval .merge .cm-deletedChunk").catch(() => "");
  if (!added.includes("changed by the agent") || !removed.includes("rewritten by the shell")) await fail(`the edit shown: +${added} -${removed}`);
  await page.click(".approval .approve");
  await page.waitForSelector(".approval.approved .verdict", { timeout: 10000 }).catch(() => fail("the card does not say it was approved"));
  // Then a command: its card shows it; approved, it runs in the workspace
  // and its output shows in the timeline.
  await page.waitForSelector('.approval:not(.approved) .action:has-text("run: echo agent-")', { timeout: 15000 })
    .catch(async () => fail("no approval card for the command: " + (await page.textContent("#agent-log"))));
  await page.focus(".approval:not(.approved) .approve");
  await page.keyboard.press("y"); // approved by keyboard
  await page.waitForFunction(() => [...document.querySelectorAll("#agent-log details.result summary")].some((s) => /^agent-42 in /.test(s.textContent)), null, { timeout: 15000 })
    .catch(async () => fail("the command's output is not shown: " + (await page.textContent("#agent-log"))));
  await page.waitForFunction(() => document.querySelector("#agent-log").textContent.includes("Made it friendlier."), null, { timeout: 15000 })
    .catch(async () => fail("no answer from the agent: " + (await page.textContent("#agent-log"))));
  await page.waitForFunction(() => document.querySelector(".cm-content").textContent.includes("changed by the agent"), null, { timeout: 10000 })
    .catch(async () => fail("the editor did not follow the agent's edit"));
  // The answer is markdown, rendered; the HTML in it stays text.
  const md = await page.evaluate(() => {
    const a = document.querySelector("#agent-log .markdown");
    return { strong: a.querySelector("strong")?.textContent, code: a.querySelector("li code")?.textContent, img: !!a.querySelector("img"), text: a.textContent };
  });
  if (md.strong !== "friendlier" || md.code !== "hello.txt" || md.img || !md.text.includes("<img src=x onerror=alert(1)>")) await fail("the answer's markdown: " + JSON.stringify(md));
  // The edit made shows as its diff, folded (its card showed it already).
  const edited = await page.$eval("#agent-log details.edited", (d) => ({ open: d.open, summary: d.querySelector("summary").textContent, add: d.querySelector(".add")?.textContent }))
    .catch(() => null);
  if (!edited || edited.open || edited.summary !== "edit hello.txt  +1 −1" || !edited.add.includes("+changed by the agent")) await fail("the edit made: " + JSON.stringify(edited));
  // Listed once: its card (the call's line gives way to it) and its diff, no result repeating them.
  const mentions = await page.$$eval("#agent-log > *", (es) => es.filter((e) => /hello\.txt/.test(e.textContent) && !e.classList.contains("user") && !e.classList.contains("markdown")).map((e) => e.className));
  if (mentions.join(",") !== "approval approved,edited") await fail("the edit is listed as: " + mentions.join(","));
  // The command's output is shown open, not folded away.
  if (!(await page.$eval("#agent-log details.result", (d) => d.open))) await fail("the command's output is folded away");
  // Its reasoning, streamed in pieces, reads as one block; the tokens of the last call show.
  const thought = await page.$$eval("#agent-log .thinking", (ts) => ts.map((t) => t.textContent));
  if (thought.join("|") !== "Checking the edit.") await fail("the reasoning shown: " + JSON.stringify(thought));
  if ((await page.textContent("#agent .usage")) !== "46 tokens") await fail("usage shown: " + (await page.textContent("#agent .usage")));
  if (shot) await page.screenshot({ path: shot });

  // Rewind that turn: the file goes back (the editor follows), the
  // conversation is cut, and the prompt returns to the box.
  // It asks first: dismissed, nothing happens; confirmed, it rewinds.
  answer(false);
  await page.click(".note.checkpoint .rewind");
  await page.waitForTimeout(300);
  if (!(await page.textContent("#agent-log")).includes("Made it friendlier.")) await fail("a dismissed rewind rewound");
  answer(true);
  await page.click(".note.checkpoint .rewind");
  await page.waitForFunction(() => document.querySelector(".cm-content").textContent.includes("rewritten by the shell"), null, { timeout: 10000 })
    .catch(async () => fail("the editor did not follow the rewind: " + (await page.textContent("#agent-log"))));
  // The prompt and the cut conversation come with the server's rewound
  // message, which may reach the page after the file reached the editor.
  await page.waitForFunction(() => document.querySelector("#agent-input").value === "make hello.txt friendlier", null, { timeout: 10000 })
    .catch(async () => fail("the prompt did not come back: " + (await page.inputValue("#agent-input"))));
  await page.waitForFunction(() => !document.querySelector("#agent-log").textContent.includes("Made it friendlier."), null, { timeout: 10000 })
    .catch(async () => fail("the rewound turn is still shown"));

  // Stop: a turn whose answer never ends is stopped from the panel, and
  // the panel takes the next prompt.
  await page.fill("#agent-input", "think forever");
  await page.press("#agent-input", "Enter");
  await page.waitForFunction(() => document.querySelector("#agent-log").textContent.includes("Let me think"), null, { timeout: 15000 })
    .catch(async () => fail("no streamed text: " + (await page.textContent("#agent-log"))));
  if ((await page.textContent("#agent-send")) !== "Stop") await fail("the send button does not offer Stop while busy");
  // A reload mid-turn: the streamed text and the running turn come back.
  await page.reload();
  await page.waitForFunction(() => document.querySelector("#agent-log").textContent.includes("Let me think"), null, { timeout: 15000 })
    .catch(async () => fail("the streamed text did not come back after a reload: " + (await page.textContent("#agent-log"))));
  await page.waitForFunction(() => document.querySelector("#agent-send").textContent === "Stop", null, { timeout: 5000 })
    .catch(async () => fail("after a reload the panel does not know the agent is at work"));
  if ((await page.textContent("#agent-log")).includes("Made it friendlier.")) await fail("the rewound turn came back after a reload");
  await page.focus("#agent-input");
  await page.keyboard.press("Escape"); // Stop, by keyboard
  await page.waitForFunction(() => document.querySelector("#agent-send").textContent === "Send", null, { timeout: 10000 })
    .catch(async () => fail("Stop did not end the turn: " + (await page.textContent("#agent-log"))));
  // New: the panel empties for another conversation.
  await page.click("#agent-new");
  await page.waitForFunction(() => !document.querySelector("#agent-log .msg"), null, { timeout: 10000 })
    .catch(async () => fail("New left the conversation shown: " + (await page.textContent("#agent-log"))));

  // History: the earlier conversations; one opens as it was.
  await page.click("#agent-history");
  await page.waitForSelector("#sessions .session", { timeout: 10000 }).catch(() => fail("History listed nothing"));
  await page.click('#sessions .session:has-text("think forever")');
  await page.waitForFunction(() => document.querySelector("#agent-log .msg.user")?.textContent === "think forever", null, { timeout: 10000 })
    .catch(async () => fail("the conversation did not open: " + (await page.textContent("#agent-log"))));

  // A second terminal, then closed with its ×: one tab again.
  await page.click("#new-term");
  await page.waitForFunction(() => window.cove.shells.length === 2 && window.cove.shells[1].shell.id, null, { timeout: 10000 })
    .catch(() => fail("no second terminal"));
  await page.click("#term-tabs .tab.active .close");
  await page.waitForFunction(() => window.cove.shells.length === 1 && document.querySelectorAll("#term-tabs .tab:not(#new-term):not(#log-tab):not(#ports-tab):not(#problems-tab)").length === 1, null, { timeout: 10000 })
    .catch(() => fail("closing a terminal left its tab"));

  // A page that comes back to a shell the workspace no longer has (it
  // restarted) gets a new one instead of waiting for it forever.
  await page.evaluate(() => sessionStorage.setItem("cove-shells", JSON.stringify(["0123456789ab"])));
  await page.reload();
  await page.waitForFunction(() => window.cove.shells[0]?.shell.id && window.cove.shells[0].shell.id !== "0123456789ab", null, { timeout: firstShellWait })
    .catch(async () => fail("no new shell for a gone one:\n" + (await screen())));
  await page.click(".term-pane");
  await page.keyboard.type("echo again-$((2*21))\n");
  await page.waitForFunction(() => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (b.getLine(i).translateToString(true).includes("again-42")) return true;
    return false;
  }, null, { timeout: 15000 }).catch(async () => fail("the new shell did not answer:\n" + (await screen())));
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
