// Small DOM helpers shared by the sections.

/** Create an element: el('button', {class: 'x', onclick: f}, 'text', child...). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** Show a result line: kind is 'ok', 'error' or 'info'. */
export function say(target, text, kind = 'info') {
  const e = typeof target === 'string' ? document.getElementById(target) : target;
  e.textContent = text;
  e.className = `result ${kind}`;
}

/** A button that needs a second press to confirm (no modal dialogs). */
export function confirmButton(label, confirmLabel, action) {
  const b = el('button', { type: 'button', class: 'danger' }, label);
  let armed = null;
  b.addEventListener('click', async () => {
    if (!armed) {
      b.textContent = confirmLabel;
      b.classList.add('armed');
      armed = setTimeout(() => { armed = null; b.textContent = label; b.classList.remove('armed'); }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    b.disabled = true;
    try { await action(); } finally { b.disabled = false; b.textContent = label; b.classList.remove('armed'); }
  });
  return b;
}

export function banner(text) {
  const b = document.getElementById('banner');
  b.textContent = text || '';
  b.hidden = !text;
}

