/** Plain-text tables for terminal output (`once`, `ls`), columns sized to their content. */

/** Renders rows under a header, two spaces between columns, a dashed rule under the header. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n') + '\n';
}

/** `k=v,k2=v2` in key order, for a table cell. */
export function formatLabels(labels: Readonly<Record<string, string>>, hidePrefixes: readonly string[] = ['teleport.internal/']): string {
  return Object.entries(labels)
    .filter(([k]) => !hidePrefixes.some((p) => k.startsWith(p)))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}
