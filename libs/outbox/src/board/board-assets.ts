import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The board's stylesheet and script, read once from the package (`assets/` beside this file, in `src` and in
 * `dist` alike): no CDN, no build step at run time.
 */
@Injectable()
export class BoardAssets {
  readonly css = readFileSync(join(__dirname, 'assets', 'board.css'), 'utf8');
  readonly js = readFileSync(join(__dirname, 'assets', 'board.js'), 'utf8');
  readonly icon = readFileSync(join(__dirname, 'assets', 'favicon.svg'), 'utf8');
}
