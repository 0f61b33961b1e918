import { escapeHtml, html, raw, withQuery } from './board-html';

describe('board html', () => {
  it('escapes every interpolated value, in content and attributes alike', () => {
    const hostile = `<script>alert("x")</script>' onload='x`;
    const out = html`<p title="${hostile}">${hostile}</p>`.value;
    expect(out).not.toContain('<script>');
    expect(out).not.toContain(`' onload`);
    expect(out).toBe(`<p title="${escapeHtml(hostile)}">${escapeHtml(hostile)}</p>`);
  });

  it('keeps markup made by html and raw, joins arrays, and drops null, undefined and false', () => {
    const items = ['a<b', 'c'].map((x) => html`<li>${x}</li>`);
    // prettier-ignore
    const out = html`<ul>${items}</ul>${null}${undefined}${false}${raw('<hr>')}`;
    expect(out.value).toBe('<ul><li>a&lt;b</li><li>c</li></ul><hr>');
  });

  it('builds query strings without the empty values', () => {
    expect(withQuery('/x', { a: 'b c', d: null, e: '', f: 2 })).toBe('/x?a=b+c&f=2');
    expect(withQuery('/x', {})).toBe('/x');
  });
});
