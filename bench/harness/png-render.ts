/**
 * Renders an SVG to PNG with the Chromium the board's browser test drives (/usr/bin/chromium, through
 * playwright-core): no other dependency. Without Chromium the SVG stays the only picture, and the caller says so.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from '../../tools/chromium';

/** Writes `svg` as a PNG at `path` and returns null, or returns why it could not. */
export async function renderPng(
  svg: string,
  width: number,
  height: number,
  path: string,
): Promise<string | null> {
  if (!existsSync(CHROMIUM_PATH))
    return `no Chromium at ${CHROMIUM_PATH} (npm run test:set-up installs it): the plots are SVG only`;
  let browser: Browser | null = null;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: [...CHROMIUM_ARGS] });
    const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
    await page.setContent(`<html><body style="margin:0">${svg}</body></html>`);
    await page.locator('svg').first().screenshot({ path });
    return null;
  } catch (error) {
    return `Chromium could not render the plot (${error instanceof Error ? error.message : String(error)}): the plots are SVG only`;
  } finally {
    await browser?.close();
  }
}

/** The width and height an SVG document declares on its root element. */
export function svgSize(svg: string): { width: number; height: number } {
  const match = /<svg[^>]*\bwidth="(\d+)"[^>]*\bheight="(\d+)"/.exec(svg);
  if (!match) throw new Error('svgSize: the SVG root has no width and height attributes');
  return { width: Number(match[1]), height: Number(match[2]) };
}
