// Small DOM helpers shared by the page's parts.

export const $ = (sel) => document.querySelector(sel);

// el makes an element: attributes (on… are listeners), then children.
export const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== false && v != null) e.setAttribute(k, v);
  }
  e.append(...kids);
  return e;
};
